// Runs fn(rank) on `size` threads and joins them (gloo's spawn() test pattern).
#ifndef HPTRAIN_TESTS_RUNTIME_COMM_SPAWN_H_
#define HPTRAIN_TESTS_RUNTIME_COMM_SPAWN_H_

#include <functional>
#include <thread>
#include <vector>

namespace hptrain::comm::testing {

inline void Spawn(int size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

}  // namespace hptrain::comm::testing

#endif  // HPTRAIN_TESTS_RUNTIME_COMM_SPAWN_H_
