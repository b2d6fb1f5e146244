// Threads for ParallelFor. Started lazily (only as many as a block_dim asked
// for), joined by the destructor.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "hpshmem/status.h"

namespace hpshmem {

class WorkerPool {
 public:
  WorkerPool() = default;
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // See hpshmem::ParallelFor.
  Status Run(int n, const std::function<Status(int)>& fn);

 private:
  void Grow(int threads);
  void WorkerMain();
  void Drain();

  std::mutex busy_;  // held for one Run; try_lock failure -> run inline
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::vector<std::thread> threads_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  const std::function<Status(int)>* fn_ = nullptr;
  int n_ = 0;
  std::atomic<int> next_{0};
  std::atomic<int> done_{0};
  int active_ = 0;  // workers inside Drain for the current generation
  Status first_error_;
};

}  // namespace hpshmem
