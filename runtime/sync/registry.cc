#include "runtime/sync/registry.h"

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(const StrategyContext& context) {
  const std::string& name = context.job->strategy.type;
  StrategyFactory factory;
  {
    std::lock_guard<std::mutex> lock(FactoriesMutex());
    auto it = Factories().find(name);
    if (it != Factories().end()) factory = it->second;
  }
  if (!factory) {
    return absl::UnimplementedError(
        absl::StrCat("strategy \"", name, "\" is not available in this build (available: ",
                     absl::StrJoin(RegisteredStrategies(), ", "), ")"));
  }
  return factory(context);
}

}  // namespace hptrain::sync
