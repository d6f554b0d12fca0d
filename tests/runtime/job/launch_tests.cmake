# Tests of hptrain_launch (runtime/job/launch.cmake). Included from tests/runtime/job/CMakeLists.txt.
hptrain_add_test(job_supervisor_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/supervisor_test.cc LIBS hptrain_launch)
hptrain_add_test(job_progress_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/progress_test.cc LIBS hptrain_launch)
hptrain_add_test(job_run_summary_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/run_summary_test.cc LIBS hptrain_launch)
hptrain_add_test(job_restart_policy_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/restart_policy_test.cc LIBS hptrain_launch)
hptrain_add_test(job_elastic_control_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/elastic_control_test.cc LIBS hptrain_launch)
hptrain_add_test(job_elastic_workers_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/elastic_workers_test.cc LIBS hptrain_launch)
