#include "worker_pool.h"

#include <sched.h>

#include "wait.h"

namespace hpshmem {

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::Grow(int threads) {
  while (static_cast<int>(threads_.size()) < threads) threads_.emplace_back([this] { WorkerMain(); });
}

void WorkerPool::Drain() {
  for (int i; (i = next_.fetch_add(1)) < n_;) {
    Status s = (*fn_)(i);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lk(mu_);
      if (first_error_.ok()) first_error_ = s;
    }
    if (done_.fetch_add(1) + 1 == n_) {
      std::lock_guard<std::mutex> lk(mu_);
      done_cv_.notify_all();
    }
  }
}

void WorkerPool::WorkerMain() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      work_cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++active_;
    }
    Drain();
    std::lock_guard<std::mutex> lk(mu_);
    if (--active_ == 0) done_cv_.notify_all();
  }
}

Status WorkerPool::Run(int n, const std::function<Status(int)>& fn) {
  if (n > 64) n = 64;
  if (n <= 1 || !busy_.try_lock()) {
    for (int i = 0; i < n; ++i) HPSHMEM_RETURN_IF_ERROR(fn(i));
    return Status::OK();
  }
  std::lock_guard<std::mutex> busy(busy_, std::adopt_lock);
  {
    std::lock_guard<std::mutex> lk(mu_);
    Grow(n - 1);
    fn_ = &fn;
    n_ = n;
    next_.store(0);
    done_.store(0);
    first_error_ = Status::OK();
    ++generation_;
  }
  work_cv_.notify_all();
  Drain();
  // Wait for the pieces, then for every worker to leave Drain, so that none
  // still reads fn_/n_ when the next Run starts.
  std::unique_lock<std::mutex> lk(mu_);
  done_cv_.wait(lk, [&] { return done_.load() >= n_ && active_ == 0; });
  fn_ = nullptr;
  return first_error_;
}

}  // namespace hpshmem
