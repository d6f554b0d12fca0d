#include "runtime/sync/registry.h"

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/job/optimizer_options.h"

namespace hptrain::sync {
namespace {

std::map<std::string, StrategyFactory>& Factories() {
  static auto* factories = new std::map<std::string, StrategyFactory>();
  return *factories;
}
std::mutex& FactoriesMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

}  // namespace

bool RegisterStrategy(const std::string& name, StrategyFactory factory) {
  std::lock_guard<std::mutex> lock(FactoriesMutex());
  Factories()[name] = std::move(factory);
  return true;
}

std::vector<std::string> RegisteredStrategies() {
  std::lock_guard<std::mutex> lock(FactoriesMutex());
  std::vector<std::string> names;
  for (const auto& [name, factory] : Factories()) names.push_back(name);
  return names;
}

StrategyContext StrategyContextFor(const job::JobSpec& spec, comm::Communicator* comm,
                                   ps::PsConnection* ps) {
  StrategyContext context;
  context.options = &spec.strategy;
  context.seed = spec.seed;
  context.optimizer = job::OptimizerOptionsFor(spec.optimizer);
  context.lr_warmup_epochs = spec.optimizer.schedule.warmup_epochs;
  context.comm = comm;
  context.ps = ps;
  return context;
}

absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(const StrategyContext& context) {
  const std::string& name = context.options->type;
  StrategyFactory factory;
  {
    std::lock_guard<std::mutex> lock(FactoriesMutex());
    auto it = Factories().find(name);
    if (it != Factories().end()) factory = it->second;
  }
  if (!factory) {
    return absl::UnimplementedError(absl::StrCat("strategy \"", name,
                                                 "\" is not available in this build (available: ",
                                                 absl::StrJoin(RegisteredStrategies(), ", "), ")"));
  }
  return factory(context);
}

}  // namespace hptrain::sync
