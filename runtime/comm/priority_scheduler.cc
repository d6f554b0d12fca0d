#include "runtime/comm/priority_scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/comm/collectives.h"

namespace hptrain::comm {
namespace {

// Layers as given, or one layer per tensor when the given ones are unusable (wrong length,
// decreasing, or not starting at 0 with no gaps).
std::vector<int> UsableLayers(std::vector<int> layers, size_t tensors) {
  bool ok = layers.size() == tensors && (tensors == 0 || layers[0] == 0);
  for (size_t t = 1; ok && t < layers.size(); ++t) {
    ok = layers[t] == layers[t - 1] || layers[t] == layers[t - 1] + 1;
  }
  if (ok) return layers;
  std::vector<int> own(tensors);
  for (size_t t = 0; t < tensors; ++t) own[t] = static_cast<int>(t);
  return own;
}

}  // namespace

PriorityScheduler::PriorityScheduler(Communicator* comm,
                                     std::vector<std::pair<size_t, size_t>> tensor_ranges,
                                     std::vector<int> tensor_layers, float* gradients,
                                     Options options, Hooks hooks)
    : comm_(comm),
      gradients_(gradients),
      options_(options),
      hooks_(std::move(hooks)),
      tensor_ranges_(std::move(tensor_ranges)),
      tensor_layers_(UsableLayers(std::move(tensor_layers), tensor_ranges_.size())),
      origin_(std::chrono::steady_clock::now()) {
  options_.partition_elements = std::max<int64_t>(1, options_.partition_elements);
  options_.credit_elements = std::max(options_.credit_elements, options_.partition_elements);
  for (size_t t = 0; t < tensor_ranges_.size(); ++t) {
    const int layer = tensor_layers_[t];
    if (layer == num_layers()) {
      layer_ranges_.push_back(tensor_ranges_[t]);
      layer_tensors_.push_back(0);
    }
    layer_ranges_[layer].first = std::min(layer_ranges_[layer].first, tensor_ranges_[t].first);
    layer_ranges_[layer].second = std::max(layer_ranges_[layer].second, tensor_ranges_[t].second);
    ++layer_tensors_[layer];
  }
  const size_t delta = static_cast<size_t>(options_.partition_elements);
  for (int l = 0; l < num_layers(); ++l) {
    first_chunk_.push_back(static_cast<int>(chunks_.size()));
    const auto [begin, end] = layer_ranges_[l];
    const size_t parts = (end - begin + delta - 1) / delta;
    for (size_t i = 0; i < parts; ++i) {
      size_t b, e;
      ChunkRange(end - begin, static_cast<int>(parts), static_cast<int>(i), &b, &e);
      chunks_.push_back({l, begin + b, begin + e});
    }
  }
  first_chunk_.push_back(static_cast<int>(chunks_.size()));
  tensor_ready_.assign(tensor_ranges_.size(), false);
  pending_tensors_.assign(num_layers(), 0);
  layer_prepared_.assign(num_layers(), false);
  pending_chunks_.assign(num_layers(), 0);
  finished_step_.assign(num_layers(), 0);
  known_ready_.assign(chunks_.size(), false);
  launched_.assign(chunks_.size(), false);
  thread_ = std::thread([this] { Loop(); });
}

PriorityScheduler::~PriorityScheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

double PriorityScheduler::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
}

absl::Status PriorityScheduler::BeginStep(float* exchange) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !active_; });
  if (!status_.ok()) return status_;
  ++step_;
  active_ = true;
  exchange_ = exchange;
  std::fill(tensor_ready_.begin(), tensor_ready_.end(), false);
  std::fill(layer_prepared_.begin(), layer_prepared_.end(), false);
  for (int l = 0; l < num_layers(); ++l) {
    pending_tensors_[l] = layer_tensors_[l];
    pending_chunks_[l] = first_chunk_[l + 1] - first_chunk_[l];
  }
  layers_finished_ = 0;
  std::fill(known_ready_.begin(), known_ready_.end(), false);
  std::fill(launched_.begin(), launched_.end(), false);
  reported_ready_ = 0;
  lock.unlock();
  cv_.notify_all();
  return absl::OkStatus();
}

void PriorityScheduler::MarkReady(int tensor) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!active_ || tensor_ready_[tensor]) return;
    tensor_ready_[tensor] = true;
    --pending_tensors_[tensor_layers_[tensor]];
  }
  cv_.notify_all();
}

void PriorityScheduler::EndBackward() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!active_) return;
    for (size_t t = 0; t < tensor_ranges_.size(); ++t) {
      if (tensor_ready_[t]) continue;
      const auto [begin, end] = tensor_ranges_[t];
      std::memset(gradients_ + begin, 0, (end - begin) * sizeof(float));
      tensor_ready_[t] = true;
      --pending_tensors_[tensor_layers_[t]];
    }
  }
  cv_.notify_all();
}

void PriorityScheduler::WaitLayer(int layer) {
  const double start = Now();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stop_ || !active_ || finished_step_[layer] == step_; });
  exposed_seconds_ += Now() - start;
}

absl::Status PriorityScheduler::WaitIdle() {
  const double start = Now();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !active_; });
  exposed_seconds_ += Now() - start;
  return status_;
}

void PriorityScheduler::TakeSeconds(double* comm_seconds, double* exposed_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  *comm_seconds = comm_seconds_;
  *exposed_seconds = exposed_seconds_;
  comm_seconds_ = 0;
  exposed_seconds_ = 0;
}

std::vector<PriorityScheduler::Launch> PriorityScheduler::launches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return launches_;
}

void PriorityScheduler::Fail(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
}

void PriorityScheduler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!Advance(lock)) cv_.wait(lock);
  }
}

void PriorityScheduler::FinishLayer(int layer, std::unique_lock<std::mutex>& lock) {
  if (status_.ok() && hooks_.finish) {
    lock.unlock();
    absl::Status status =
        hooks_.finish(layer, layer_ranges_[layer].first, layer_ranges_[layer].second);
    lock.lock();
    if (!status.ok()) Fail(status);
  }
  finished_step_[layer] = step_;
  if (++layers_finished_ == num_layers()) active_ = false;
  cv_.notify_all();
}

bool PriorityScheduler::Advance(std::unique_lock<std::mutex>& lock) {
  if (!active_) return false;
  // A failed step is drained: every layer counts as finished, so no forward waits for it.
  if (!status_.ok()) {
    for (int l = 0; l < num_layers(); ++l) finished_step_[l] = step_;
    layers_finished_ = num_layers();
    active_ = false;
    cv_.notify_all();
    return true;
  }
  // Layers whose gradients are all in: prepare them (their chunks become ready here), and in a
  // step without an exchange finish them at once.
  for (int l = 0; l < num_layers(); ++l) {
    if (pending_tensors_[l] != 0 || layer_prepared_[l]) continue;
    layer_prepared_[l] = true;
    if (hooks_.prepare) {
      lock.unlock();
      absl::Status status = hooks_.prepare(l, layer_ranges_[l].first, layer_ranges_[l].second);
      lock.lock();
      if (!status.ok()) {
        Fail(absl::Status(status.code(), absl::StrCat("layer ", l, ": ", status.message())));
        return true;
      }
    }
    if (exchange_ == nullptr || pending_chunks_[l] == 0) FinishLayer(l, lock);
    return true;
  }
  if (exchange_ == nullptr) return false;

  // The next collective, the same on every rank: the most urgent chunks known ready everywhere,
  // within the credit; or, when none is left, a negotiation.
  std::vector<int> candidates;
  bool all_launched = true;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (launched_[c]) continue;
    all_launched = false;
    if (known_ready_[c]) candidates.push_back(static_cast<int>(c));
  }
  if (all_launched) return false;  // the last launch's layers finish the step
  std::vector<float> ready(chunks_.size(), 0.0f);
  int ready_here = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (layer_prepared_[chunks_[c].layer]) {
      ready[c] = 1.0f;
      ++ready_here;
    }
  }
  std::vector<int> launch;
  int64_t elements = 0;
  for (int c : candidates) {
    const int64_t size = static_cast<int64_t>(chunks_[c].end - chunks_[c].begin);
    if (!launch.empty() && elements + size > options_.credit_elements) break;
    launch.push_back(c);
    elements += size;
  }
  if (launch.empty() && ready_here == reported_ready_ &&
      ready_here < static_cast<int>(chunks_.size())) {
    return false;  // nothing new to report: wait for backward
  }
  for (int c : launch) launched_[c] = true;
  reported_ready_ = ready_here;
  Launch record;
  record.step = step_;
  record.chunks = launch;
  record.candidates = std::move(candidates);
  record.elements = elements;
  record.start = Now();
  lock.unlock();
  absl::Status status = RunLaunch(launch, &ready);
  const double end = Now();
  lock.lock();
  comm_seconds_ += end - record.start;
  if (options_.record) {
    record.end = end;
    launches_.push_back(std::move(record));
  }
  if (!status.ok()) {
    Fail(status);
    return true;
  }
  const float world = static_cast<float>(comm_->size());
  for (size_t c = 0; c < chunks_.size(); ++c) known_ready_[c] = ready[c] == world;
  for (int c : launch) {
    const int layer = chunks_[c].layer;
    if (--pending_chunks_[layer] == 0) FinishLayer(layer, lock);
  }
  return true;
}

absl::Status PriorityScheduler::RunLaunch(const std::vector<int>& launch,
                                          std::vector<float>* ready) {
  // Staging: piece p of every chunk, then of the readiness vector, in ring segment p.
  const int n = comm_->size();
  struct Item {
    float* data;
    size_t count;
  };
  std::vector<Item> items;
  for (int c : launch) {
    items.push_back({exchange_ + chunks_[c].begin, chunks_[c].end - chunks_[c].begin});
  }
  items.push_back({ready->data(), ready->size()});
  std::vector<size_t> segment(n, 0);
  for (const Item& item : items) {
    for (int p = 0; p < n; ++p) {
      size_t b, e;
      ChunkRange(item.count, n, p, &b, &e);
      segment[p] += e - b;
    }
  }
  const size_t m = *std::max_element(segment.begin(), segment.end());
  staging_.assign(m * n, 0.0f);
  auto move_pieces = [&](bool to_staging) {
    for (int p = 0; p < n; ++p) {
      size_t offset = p * m;
      for (const Item& item : items) {
        size_t b, e;
        ChunkRange(item.count, n, p, &b, &e);
        float* staged = staging_.data() + offset;
        if (to_staging) {
          std::memcpy(staged, item.data + b, (e - b) * sizeof(float));
        } else {
          std::memcpy(item.data + b, staged, (e - b) * sizeof(float));
        }
        offset += e - b;
      }
    }
  };
  move_pieces(true);
  absl::Status status = comm_->AllReduceSum(staging_.data(), staging_.size());
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat(launch.empty() ? "readiness negotiation" : "launch of ",
                                     launch.empty() ? "" : absl::StrCat(launch.size(), " chunks"),
                                     ": ", status.message()));
  }
  move_pieces(false);
  if (options_.chunk_delay_seconds > 0 && !launch.empty()) {
    std::this_thread::sleep_for(
        std::chrono::duration<double>(options_.chunk_delay_seconds * launch.size()));
  }
  return absl::OkStatus();
}

}  // namespace hptrain::comm
