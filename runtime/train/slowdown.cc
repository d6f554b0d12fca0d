#include "runtime/train/slowdown.h"

#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace hptrain::train {

Slowdown::Slowdown(std::vector<double> factors, std::string control_file, int rank, int window)
    : factors_(std::move(factors)),
      control_file_(std::move(control_file)),
      rank_(rank),
      window_(static_cast<size_t>(std::max(window, 1))) {}

double Slowdown::Factor() {
  if (!control_file_.empty()) {
    struct stat st;
    if (stat(control_file_.c_str(), &st) == 0 &&
        (st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec ||
         st.st_size != size_)) {
      mtime_ = st.st_mtim;
      size_ = st.st_size;
      Reload();
    }
  }
  if (rank_ < 0 || static_cast<size_t>(rank_) >= factors_.size()) return 1.0;
  return factors_[static_cast<size_t>(rank_)];
}

double Slowdown::EmulatedSeconds(double factor, double wall_seconds, double cpu_seconds) {
  if (!(factor > 1.0)) return wall_seconds;
  return std::max(wall_seconds, factor * cpu_seconds);
}

double Slowdown::ChargedCpuSeconds(int batch, double cpu_seconds) {
  if (window_ == 1) return cpu_seconds;
  std::deque<double>& recent = recent_[batch];
  recent.push_back(cpu_seconds);
  if (recent.size() > window_) recent.pop_front();
  std::vector<double> sorted(recent.begin(), recent.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

double Slowdown::ThreadCpuSeconds() {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void Slowdown::Reload() {
  std::ifstream in(control_file_);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<double> factors;
  std::string word;
  std::string problem;
  while (text >> word) {
    char* end = nullptr;
    const double f = std::strtod(word.c_str(), &end);
    if (end == word.c_str() || *end != '\0' || !(f >= 1.0) || f > 1e6) {
      problem = "\"" + word + "\" is not a factor >= 1";
      break;
    }
    factors.push_back(f);
  }
  if (problem.empty() && static_cast<size_t>(rank_) >= factors.size()) {
    problem = "has " + std::to_string(factors.size()) + " factors, none for rank " +
              std::to_string(rank_);
  }
  if (!problem.empty()) {
    if (problem != last_warning_) {
      std::fprintf(stderr, "warning: slowdown file %s: %s; keeping the previous factors\n",
                   control_file_.c_str(), problem.c_str());
      last_warning_ = problem;
    }
    return;
  }
  last_warning_.clear();
  factors_ = std::move(factors);
}

double Slowdown::Stretch(int batch, double wall_seconds, double cpu_seconds) {
  const double emulated =
      EmulatedSeconds(Factor(), wall_seconds, ChargedCpuSeconds(batch, cpu_seconds));
  if (emulated <= wall_seconds) return wall_seconds;
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(emulated - wall_seconds));
  return wall_seconds +
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace hptrain::train
