// The job's optimizer section (spec.optimizer) as runtime/optim's options: the optimizer's own
// settings and its LR schedule's. runtime/optim knows nothing of the job spec; the trainer, the
// parameter server and the strategies that step parameters convert here.
#ifndef HPTRAIN_RUNTIME_JOB_OPTIMIZER_OPTIONS_H_
#define HPTRAIN_RUNTIME_JOB_OPTIMIZER_OPTIONS_H_

#include "runtime/job/job_spec.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/optimizer_options.h"

namespace hptrain::job {

// type "adam" is Adam, anything else SGD (the validator admits only sgd and adam).
optim::OptimizerOptions OptimizerOptionsFor(const OptimizerSpec& spec);

// The schedule of spec.optimizer over a run of `epochs` epochs; a schedule type other than
// step or cosine is constant.
optim::LrScheduleOptions LrScheduleFor(const OptimizerSpec& spec, int epochs);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_OPTIMIZER_OPTIONS_H_
