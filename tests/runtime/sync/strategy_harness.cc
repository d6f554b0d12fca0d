#include "tests/runtime/sync/strategy_harness.h"

#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/comm/bucketed_reducer.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/comm/priority_scheduler.h"
#include "runtime/job/optimizer_options.h"
#include "runtime/optim/optimizer.h"
#include "runtime/base/status.h"
#include "runtime/ps/mp2/job_options.h"
#include "runtime/sync/hierarchical.h"
#include "runtime/sync/registry.h"

namespace hptrain::sync::testing {

LocalPs::LocalPs(const job::JobSpec& spec, int world, int shards) {
  if (spec.strategy.type == "mp2") {
    auto opened = ps::mp2::OpenPredictor(spec);
    if (!opened.ok()) std::abort();  // the tests write their predictor files themselves
    predictor = *opened;
  }
  for (int s = 0; s < shards; ++s) {
    ps::ParamStoreConfig config;
    config.shard = s;
    config.world_size = world;
    config.global_batch = spec.global_batch_size;
    config.optimizer = spec.optimizer;
    config.max_lead = spec.strategy.type == "hps" && spec.strategy.Int("staleness") != 0 ? 1 : 0;
    if (spec.strategy.type == "mp2") {
      ps::Mp2StoreConfig mp2;
      mp2.prediction = ps::mp2::PredictionOptionsFor(spec);
      mp2.predictor = predictor.get();
      config.mp2 = mp2;
    }
    stores.push_back(std::make_unique<ps::ParamStore>(config));
  }
  std::vector<ps::ParamStore*> raw;
  for (auto& s : stores) raw.push_back(s.get());
  for (int r = 0; r < world; ++r) {
    connections.push_back(std::make_unique<ps::LocalPsConnection>(raw));
  }
}

std::vector<ps::PsConnection*> LocalPs::for_ranks() {
  std::vector<ps::PsConnection*> out;
  for (auto& c : connections) out.push_back(c.get());
  return out;
}

SimResult RunPs(const job::JobSpec& spec, SimOptions options, int shards,
                std::unique_ptr<LocalPs>* keep) {
  auto local = std::make_unique<LocalPs>(spec, options.world, shards);
  options.ps = local->for_ranks();
  SimResult result = Simulate(spec, options);
  if (keep != nullptr) *keep = std::move(local);
  return result;
}

job::JobSpec HarnessJob(const std::string& strategy) {
  job::JobSpec spec;
  spec.name = "harness";
  spec.strategy.type = strategy;
  spec.optimizer.lr = 0.1;
  spec.optimizer.momentum = 0.9;
  spec.optimizer.weight_decay = 1e-4;
  spec.global_batch_size = 64;
  spec.seed = 5;
  return spec;
}

SimResult Simulate(const job::JobSpec& spec, const SimOptions& options) {
  const int world = options.world;
  auto hub = std::make_shared<comm::LoopbackHub>(world);
  SimResult result;
  result.params.resize(world);
  result.bytes_sent.resize(world);
  result.inter_node_bytes_sent.resize(world);
  result.max_staleness.resize(world);
  result.sections.resize(world);
  result.decisions.resize(world);
  result.final_bits.resize(world);
  std::mutex mu;
  auto gradient = options.gradient ? options.gradient : [](int rank, int step, size_t i) {
    return std::sin(0.001f * static_cast<float>(i) + 0.3f * rank + 0.7f * step) * 0.5f +
           0.01f * rank;
  };
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      auto fail = [&](const absl::Status& status) {
        std::lock_guard<std::mutex> lock(mu);
        result.ok = false;
        result.error = std::string(status.message());
      };
      // spec.topology and spec.communicator choose the communicator, as in the worker.
      auto made = MakeJobCommunicator(spec, std::make_unique<comm::LoopbackTransport>(hub, rank));
      if (!made.ok()) return fail(made.status());
      comm::Communicator& comm = **made;
      StrategyContext context =
          StrategyContextFor(spec, &comm, options.ps.empty() ? nullptr : options.ps[rank]);
      auto strategy = CreateStrategy(context);
      if (!strategy.ok()) return fail(strategy.status());
      StepInfo info;
      // The trainer's feed (step_exchange.cc): each bucket to the reducer, or the updater.
      GradientReducer* gradient_reducer = (*strategy)->reducer();
      Updater* updater = (*strategy)->updater();
      ModelAverager* averager = (*strategy)->averager();
      comm::BucketedReducer reducer(
          options.tensor_sizes, options.bucket_bytes,
          comm::BucketedReducer::AsyncReduceFn([&](int bucket, float* data, size_t n) {
            const comm::BufferRef buffer = comm::BufferRef::Host(data, n);
            return updater != nullptr ? updater->Accumulate(info, bucket, buffer)
                                      : gradient_reducer->Reduce(info, bucket, buffer);
          }));
      GradientLayout layout;
      for (int t = 0; t < reducer.num_tensors(); ++t) {
        layout.tensors.push_back({reducer.offset(t), reducer.offset(t) + reducer.tensor_size(t)});
      }
      for (int k = 0; k < reducer.num_buckets(); ++k) {
        auto [b, e] = reducer.bucket_range(k);
        layout.buckets.push_back({b, e});
      }
      if (auto s = (*strategy)->Init(layout); !s.ok()) return fail(s);
      optim::OptimizerOptions optimizer_options = job::OptimizerOptionsFor(spec.optimizer);
      if ((*strategy)->traits().applies_momentum) optimizer_options.momentum = 0;
      optim::Optimizer optimizer(optimizer_options, reducer.size());
      std::vector<float> params(reducer.size());
      for (size_t i = 0; i < params.size(); ++i) params[i] = 0.01f * std::cos(0.01f * i);
      if (auto s = (*strategy)->Start(absl::MakeSpan(params), 0, {}); !s.ok()) return fail(s);
      // spec.scheduler priority: the trainer's scheduled path (scheduled_exchange.cc), with the
      // tensors paired into layers (weight, bias).
      StepInfo scheduled_info;
      std::unique_ptr<comm::PriorityScheduler> scheduler;
      if (spec.scheduler.type == "priority") {
        std::vector<std::pair<size_t, size_t>> ranges;
        std::vector<int> layers;
        for (int t = 0; t < reducer.num_tensors(); ++t) {
          ranges.push_back({reducer.offset(t), reducer.offset(t) + reducer.tensor_size(t)});
          layers.push_back(t / 2);
        }
        comm::PriorityScheduler::Options scheduler_options;
        scheduler_options.partition_elements = spec.scheduler.partition();
        scheduler_options.credit_elements = spec.scheduler.credit();
        comm::PriorityScheduler::Hooks hooks;
        hooks.prepare = [&](int, size_t begin, size_t end) {
          if (updater == nullptr) return absl::OkStatus();
          return updater->PrepareRange(scheduled_info, begin, end, reducer.data());
        };
        hooks.finish = [&](int, size_t begin, size_t end) {
          if (updater != nullptr) {
            return updater->FinishRange(scheduled_info, begin, end, reducer.data(),
                                        absl::MakeSpan(params));
          }
          HPTRAIN_RETURN_IF_ERROR(DivideByGlobalBatch(
              scheduled_info, comm::BufferRef::Host(reducer.data() + begin, end - begin)));
          optimizer.StepRange(params.data(), reducer.data(), begin, end, scheduled_info.lr);
          return absl::OkStatus();
        };
        scheduler = std::make_unique<comm::PriorityScheduler>(
            &comm, ranges, layers, reducer.data(), scheduler_options, hooks);
      }
      for (int step = 0; step < options.steps; ++step) {
        info.step = step;
        info.epoch = options.steps_per_epoch > 0 ? step / options.steps_per_epoch : 0;
        info.epoch_clock = options.steps_per_epoch > 0
                               ? static_cast<double>(step) / options.steps_per_epoch
                               : 0.0;
        info.global_batch = options.global_batch;
        info.local_batch = options.local_batches.empty() ? options.global_batch / world
                                                         : options.local_batches[rank];
        info.lr = spec.optimizer.lr;
        bool synchronized = false;  // the step left every rank with the same parameters
        if (scheduler) {
          if (auto s = scheduler->WaitIdle(); !s.ok()) return fail(s);
          scheduled_info = info;
          ScheduledStep plan;
          if (updater != nullptr) {
            plan = updater->PlanScheduledStep(scheduled_info, reducer.data());
          } else {
            optimizer.BeginStep();
            plan.exchange = reducer.data();
          }
          synchronized = plan.synchronizes;
          if (auto s = scheduler->BeginStep(plan.exchange); !s.ok()) return fail(s);
        } else {
          reducer.BeginStep();
        }
        for (int t = reducer.num_tensors() - 1; t >= 0; --t) {
          float* g = reducer.data_for(t);
          for (size_t i = 0; i < reducer.tensor_size(t); ++i) {
            g[i] = gradient(rank, step, reducer.offset(t) + i);
          }
          if (scheduler) {
            scheduler->MarkReady(t);
          } else {
            reducer.MarkReady(t);
          }
        }
        if (scheduler) {
          scheduler->EndBackward();
          // What follows reads the whole model (the trainer drains at the same points).
          if (synchronized || options.after_step ||
              (options.steps_per_epoch > 0 && (step + 1) % options.steps_per_epoch == 0)) {
            if (auto s = scheduler->WaitIdle(); !s.ok()) return fail(s);
          }
        } else {
          if (auto s = reducer.FinishStep(); !s.ok()) return fail(s);
          absl::StatusOr<bool> agreed = false;
          if (updater != nullptr) {
            agreed = updater->Update(info, absl::MakeSpan(params));
          } else {
            // The reducer's buffer holds the gradients to step on (the mean): no division here.
            optimizer.Step(params.data(), reducer.data(), spec.optimizer.lr);
            if (averager != nullptr) agreed = averager->Average(info, {absl::MakeSpan(params), {}});
          }
          if (!agreed.ok()) return fail(agreed.status());
          synchronized = *agreed;
        }
        if (rank == 0 && synchronized) {
          result.synchronized_steps.push_back(step);  // only rank 0 writes it
        }
        if (options.step_timing) {
          StepTiming timing = options.step_timing(rank, step);
          timing.step = step;
          (*strategy)->OnStepTiming(timing);
        }
        if (options.after_step) options.after_step(rank, step, params);
        if (options.steps_per_epoch > 0 && (step + 1) % options.steps_per_epoch == 0) {
          if (options.synchronize_at_epoch_end) {
            if (auto s = (*strategy)->Synchronize(step + 1, absl::MakeSpan(params)); !s.ok()) {
              return fail(s);
            }
            if (options.after_synchronize) options.after_synchronize(rank, step, params);
          }
          EpochTiming timing;
          timing.epoch = (step + 1) / options.steps_per_epoch - 1;
          timing.compute_seconds = 1.0;
          timing.comm_seconds = reducer.last_comm_seconds();
          timing.exposed_comm_seconds = reducer.last_exposed_seconds();
          if (options.epoch_timing) timing = options.epoch_timing(timing.epoch);
          if (auto s = (*strategy)->OnEpochEnd(timing); !s.ok()) return fail(s);
          if (rank == 0) result.bits.push_back((*strategy)->stats().bits);
          if (rank == 0) result.intervals.push_back((*strategy)->stats().interval);
        }
      }
      if (scheduler) {
        if (auto s = scheduler->WaitIdle(); !s.ok()) return fail(s);
      }
      if (options.synchronize_at_end) {
        if (auto s = (*strategy)->Synchronize(options.steps, absl::MakeSpan(params)); !s.ok()) {
          return fail(s);
        }
      }
      CheckpointSections sections;
      if (options.save_state) {
        if (auto s = (*strategy)->SaveState(options.steps, &sections); !s.ok()) return fail(s);
      }
      std::lock_guard<std::mutex> lock(mu);
      if (options.save_state) result.sections[rank] = std::move(sections);
      result.max_staleness[rank] = (*strategy)->stats().max_staleness;
      result.decisions[rank] = (*strategy)->stats().decision;
      result.final_bits[rank] = (*strategy)->stats().bits;
      result.params[rank] = params;
      result.bytes_sent[rank] = comm.bytes_sent();
      result.inter_node_bytes_sent[rank] = comm.inter_node_bytes_sent();
    });
  }
  for (auto& t : threads) t.join();
  return result;
}

}  // namespace hptrain::sync::testing
