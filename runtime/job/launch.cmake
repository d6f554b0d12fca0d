# hptrain_launch: the pieces of the local launcher (`hptrain run`) that do not depend on the job
# spec: process supervision, the progress display and the run summary (JSON + table).
# Included from runtime/job/CMakeLists.txt.
add_library(hptrain_launch STATIC
  ${CMAKE_CURRENT_LIST_DIR}/supervisor.cc
  ${CMAKE_CURRENT_LIST_DIR}/restart_policy.cc
  ${CMAKE_CURRENT_LIST_DIR}/elastic_control.cc
  ${CMAKE_CURRENT_LIST_DIR}/elastic_workers.cc
  ${CMAKE_CURRENT_LIST_DIR}/progress.cc
  ${CMAKE_CURRENT_LIST_DIR}/run_summary.cc)
target_link_libraries(hptrain_launch
  PUBLIC hptrain_base absl::status absl::statusor absl::strings absl::str_format absl::time
  PRIVATE nlohmann_json::nlohmann_json)
