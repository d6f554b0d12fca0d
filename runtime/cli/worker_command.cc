// hptrain worker: one training process of the built-in trainer. Configured by flags or HPTRAIN_*
// environment variables (the controller sets the latter in pods). The worker session
// (worker_session.h) joins the job; the trainer trains, reporting through the session; the
// session reports done (or the failure) and the process exits.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/base/blas.h"
#include "runtime/base/exit_codes.h"
#include "runtime/base/status.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/flags.h"
#include "runtime/cli/worker_session.h"
#include "runtime/train/trainer.h"

namespace hptrain::cli {
namespace {

absl::Status RunWorker(const WorkerConfig& config) {
  HPTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<WorkerSession> session, WorkerSession::Create(config));
  HPTRAIN_ASSIGN_OR_RETURN(
      auto trainer, train::Trainer::Create(session->spec(), session->TrainerOptions(),
                                           session->communicator(), session->TrainerCallbacks()));
  session->SetTorchThreads(trainer->threads().threads, trainer->threads().basis);
  // Once, at start: a CPU worker on the reference BLAS trains slower than on OpenBLAS.
  if (session->device().kind == "cpu") {
    const std::string warning = BlasWarning(LoadedBlas());
    if (!warning.empty()) {
      std::fprintf(stderr, "hptrain worker %d: %s\n", session->rank(), warning.c_str());
    }
  }
  session->SetReady();
  return session->Finish(trainer->Run());
}

}  // namespace

int WorkerCommand(int argc, char** argv) {
  WorkerConfig flags;
  FlagSet set("worker", "--job JOB.yaml --coordinator HOST:PORT --rank N --token-file PATH");
  DefineWorkerFlags(set, &flags);
  // Before the command line, which overrides it; a bad value is reported after --help had its say.
  const absl::Status resume_from_env = ResumeFromEnvironment(&flags.resume);
  OverridesFromEnvironment(&flags.overrides);
  int exit_code = kExitOk;
  if (!set.ParseOrExit(argc, argv, &exit_code)) return exit_code;
  if (!resume_from_env.ok()) return ReportError("worker", resume_from_env);
  if (flags.job_file.empty()) {
    return ReportError("worker", absl::InvalidArgumentError("--job (or $HPTRAIN_JOB) is required"));
  }
  absl::Status status = RunWorker(flags);
  if (!status.ok()) return ReportError(absl::StrCat("worker ", flags.rank), status);
  return kExitOk;
}

}  // namespace hptrain::cli
