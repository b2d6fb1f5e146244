// Primitive benchmark of libhpshmem on 2 ranks of this host, with a plain
// single-thread memcpy of the same sizes measured in the same run.
//
//   bench_primitives [--out bench-results/primitives.json] [--quick]
//
// Prints a table and writes JSON records {op, impl, ranks, bytes, median_us,
// gbps | mops}. Not a test: nothing here asserts a time.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "multirank.h"
#include "ops/ops.h"

using hpshmem::Cmp;
using hpshmem::SignalOp;
using hpshmem::SignalType;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kEndOfPings = INT64_MAX;

struct Record {
  std::string op, impl;
  int ranks;
  size_t bytes;
  double median_us;
  double gbps;  // 0 when not a bandwidth
  double mops;  // 0 when not a rate
};

double Now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds per call of each fn, sampled in turn (fn0, fn1, ..., fn0,
// ...) so that drift in the machine's memory speed hits all of them alike.
// Each sample is a batch sized to ~2 ms; about `budget` seconds per fn, at
// least 7 samples each.
std::vector<double> TimeInterleaved(const std::vector<std::function<void()>>& fns, double budget) {
  std::vector<int> batch(fns.size(), 1);
  for (size_t f = 0; f < fns.size(); ++f) {
    fns[f]();  // warm-up: faults pages in, wakes threads
    for (;;) {
      double t0 = Now();
      for (int i = 0; i < batch[f]; ++i) fns[f]();
      if (Now() - t0 > 2e-3 || batch[f] >= (1 << 20)) break;
      batch[f] *= 2;
    }
  }
  std::vector<std::vector<double>> samples(fns.size());
  double end = Now() + budget * fns.size();
  while (samples[0].size() < 7 || (Now() < end && samples[0].size() < 1000)) {
    for (size_t f = 0; f < fns.size(); ++f) {
      double t0 = Now();
      for (int i = 0; i < batch[f]; ++i) fns[f]();
      samples[f].push_back((Now() - t0) / batch[f]);
    }
  }
  std::vector<double> med;
  for (auto& v : samples) med.push_back(Median(v));
  return med;
}

template <class F>
double TimePerCall(F&& fn, double budget) {
  return TimeInterleaved({std::function<void()>(fn)}, budget)[0];
}

void Check(const hpshmem::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(2);
  }
}

void WriteJson(const std::vector<Record>& recs, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::perror(path.c_str());
    return;
  }
  std::fprintf(f, "{\n  \"benchmark\": \"primitives\",\n  \"records\": [\n");
  for (size_t i = 0; i < recs.size(); ++i) {
    const Record& r = recs[i];
    std::fprintf(f, "    {\"op\": \"%s\", \"impl\": \"%s\", \"ranks\": %d, \"bytes\": %zu, \"median_us\": %.4f",
                 r.op.c_str(), r.impl.c_str(), r.ranks, r.bytes, r.median_us);
    if (r.gbps > 0) std::fprintf(f, ", \"gbps\": %.3f", r.gbps);
    if (r.mops > 0) std::fprintf(f, ", \"mops\": %.3f", r.mops);
    std::fprintf(f, "}%s\n", i + 1 < recs.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

std::string Human(size_t b) {
  char s[32];
  if (b >= (1 << 20))
    std::snprintf(s, sizeof s, "%zu MiB", b >> 20);
  else if (b >= 1024)
    std::snprintf(s, sizeof s, "%zu KiB", b >> 10);
  else
    std::snprintf(s, sizeof s, "%zu B", b);
  return s;
}

// Allgather and alltoall (push) on every rank with the same call counts
// everywhere (fixed, not timed: collectives must match); rank 0 reports the
// median of its batches, each started after a barrier.
template <class Row>
void Collectives(int rank, int n, void* heap, size_t max_bytes, bool quick, Row&& row) {
  std::vector<char> in(max_bytes / n, 3);
  std::vector<int64_t> elems(n);
  std::vector<const void*> sends(n);
  const int batches = quick ? 5 : 11;
  for (size_t b = 8; b * n <= max_bytes && b <= (quick ? (1u << 20) : (16u << 20)); b *= 8) {
    int per = static_cast<int>(std::clamp<size_t>((64u << 20) / (b * n), 4, 400));
    for (int k = 0; k < n; ++k) {
      elems[k] = static_cast<int64_t>(b);
      sends[k] = in.data();
    }
    std::vector<double> ag, a2a, ar, rs, bc;
    const size_t floats = std::max<size_t>(1, b / 4 / n) * n;  // a multiple of the ranks, for reduce-scatter
    for (int i = 0; i < batches; ++i) {
      Check(hpshmem::Barrier(), "barrier");
      double t1 = Now();
      for (int k = 0; k < per; ++k) {
        Check(hpshmem::ops::Allreduce(heap, floats, hpshmem::ops::DType::kFloat32, hpshmem::ops::ReduceOp::kSum),
              "allreduce");
      }
      ar.push_back((Now() - t1) / per);
      Check(hpshmem::Barrier(), "barrier");
      t1 = Now();
      for (int k = 0; k < per; ++k) {
        Check(hpshmem::ops::ReduceScatter(in.data(), heap, floats / n, hpshmem::ops::DType::kFloat32,
                                          hpshmem::ops::ReduceOp::kSum),
              "reduce_scatter");
      }
      rs.push_back((Now() - t1) / per);
      Check(hpshmem::Barrier(), "barrier");
      t1 = Now();
      for (int k = 0; k < per; ++k) Check(hpshmem::ops::Broadcast(heap, floats * 4, 0), "broadcast");
      bc.push_back((Now() - t1) / per);
      Check(hpshmem::Barrier(), "barrier");
      double t0 = Now();
      for (int k = 0; k < per; ++k) Check(hpshmem::ops::Allgather(heap, in.data(), b, false, 1), "allgather");
      ag.push_back((Now() - t0) / per);
      Check(hpshmem::Barrier(), "barrier");
      t0 = Now();
      for (int k = 0; k < per; ++k) {
        Check(hpshmem::ops::Alltoall(sends.data(), elems.data(), heap, elems.data(), 1, false, 1), "alltoall");
      }
      a2a.push_back((Now() - t0) / per);
    }
    (void)rank;
    row({"allgather", "hpshmem push", n, b, Median(ag) * 1e6, b * n / Median(ag) / 1e9, 0});
    row({"alltoall", "hpshmem push", n, b, Median(a2a) * 1e6, b * n / Median(a2a) / 1e9, 0});
    row({"allreduce", "hpshmem", n, floats * 4, Median(ar) * 1e6, 0, 0});
    row({"reduce_scatter", "hpshmem", n, floats * 4, Median(rs) * 1e6, 0, 0});
    row({"broadcast", "hpshmem", n, floats * 4, Median(bc) * 1e6, 0, 0});
  }
}

void Body(int rank, int n, const std::string& out, bool quick) {
  const size_t max_bytes = quick ? (16 << 20) : (256 << 20);
  const double budget = quick ? 0.05 : 0.25;
  std::vector<Record> recs;
  void *dst, *sig, *counter, *flag;
  Check(hpshmem::Malloc(max_bytes, &dst), "malloc");
  Check(hpshmem::Calloc(2, sizeof(int64_t), &sig), "calloc");
  Check(hpshmem::Calloc(1, sizeof(int64_t), &counter), "calloc");
  Check(hpshmem::Calloc(1, sizeof(int64_t), &flag), "calloc");
  Check(hpshmem::Barrier(), "barrier");
  auto* done = static_cast<int64_t*>(flag);

  if (rank == 0) {
    std::vector<char> src(max_bytes, 1), local_dst(max_bytes, 2);
    std::printf("%-22s %-18s %10s %12s %12s\n", "op", "impl", "bytes", "median_us", "GB/s|Mops/s");
    auto row = [&](const Record& r) {
      recs.push_back(r);
      std::printf("%-22s %-18s %10s %12.3f %12.2f\n", r.op.c_str(), r.impl.c_str(), Human(r.bytes).c_str(), r.median_us,
                  r.gbps > 0 ? r.gbps : r.mops);
      std::fflush(stdout);
    };
    std::vector<size_t> sizes;
    for (size_t b = 8; b <= max_bytes; b *= 8) sizes.push_back(b);
    if (sizes.back() != max_bytes) sizes.push_back(max_bytes);
    for (size_t b : sizes) {
      std::vector<std::function<void()>> fns = {
          [&] {
            std::memcpy(local_dst.data(), src.data(), b);
            asm volatile("" ::: "memory");
          },
          [&] { Check(hpshmem::ops::PutMem(dst, src.data(), b, 1, 1), "put"); },
          [&] { Check(hpshmem::ops::GetMem(local_dst.data(), dst, b, 1, 1), "get"); }};
      if (b >= (1 << 20)) fns.push_back([&] { Check(hpshmem::ops::PutMem(dst, src.data(), b, 1, 2), "put"); });
      std::vector<double> t = TimeInterleaved(fns, budget);
      row({"copy", "memcpy (1 thread)", 1, b, t[0] * 1e6, b / t[0] / 1e9, 0});
      row({"put", "hpshmem", 2, b, t[1] * 1e6, b / t[1] / 1e9, 0});
      row({"get", "hpshmem", 2, b, t[2] * 1e6, b / t[2] / 1e9, 0});
      if (t.size() > 3) row({"put", "hpshmem block_dim=2", 2, b, t[3] * 1e6, b / t[3] / 1e9, 0});
    }
    // One-way latency of an 8-byte put-with-signal: half a ping-pong.
    int64_t payload = 7;
    int64_t seq = 0;
    double t = TimePerCall(
        [&] {
          ++seq;
          Check(hpshmem::PutMemSignal(dst, &payload, 8, sig, SignalType::kInt64, seq, SignalOp::kSet, 1), "ping");
          Check(hpshmem::SignalWaitUntil(static_cast<int64_t*>(sig) + 1, SignalType::kInt64, Cmp::kEq, seq, nullptr),
                "pong");
        },
        budget * 4);
    row({"put_signal_latency", "hpshmem", 2, 8, t / 2 * 1e6, 0, 0});
    // End of the ping-pong phase.
    Check(hpshmem::Signal(sig, SignalType::kInt64, kEndOfPings, SignalOp::kSet, 1), "end pings");
    // Remote atomic adds issued by one rank.
    t = TimePerCall([&] { Check(hpshmem::Signal(counter, SignalType::kInt64, 1, SignalOp::kAdd, 1), "add"); }, budget);
    row({"atomic_add", "hpshmem", 2, 8, t * 1e6, 0, 1 / t / 1e6});
    // Barriers: rank 1 runs barriers until told which one is the last.
    int64_t barriers = 0;
    t = TimePerCall(
        [&] {
          ++barriers;
          Check(hpshmem::Barrier(), "barrier");
        },
        budget * 4);
    row({"barrier", "hpshmem", 2, 0, t * 1e6, 0, 0});
    Check(hpshmem::Signal(flag, SignalType::kInt64, barriers + 1, SignalOp::kSet, 1), "last barrier");
    Check(hpshmem::Barrier(), "barrier");
    Collectives(rank, n, dst, max_bytes, quick, row);
    WriteJson(recs, out);
    std::printf("wrote %s\n", out.c_str());
  } else {
    auto* s = static_cast<int64_t*>(sig);
    for (int64_t seq = 0;;) {  // echo pings
      Check(hpshmem::SignalWaitUntil(s, SignalType::kInt64, Cmp::kGt, seq, &seq), "wait ping");
      if (seq == kEndOfPings) break;
      Check(hpshmem::Signal(s + 1, SignalType::kInt64, seq, SignalOp::kSet, 0), "pong");
    }
    for (int64_t k = 1;; ++k) {
      Check(hpshmem::Barrier(), "barrier");
      int64_t last = std::atomic_ref<int64_t>(*done).load();
      if (last > 0 && k >= last) break;
    }
    Collectives(rank, n, dst, max_bytes, quick, [](const Record&) {});
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string out = "bench-results/primitives.json";
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--out") && i + 1 < argc)
      out = argv[++i];
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
  }
  hptest::JobOptions o;
  o.heap_bytes = (quick ? (16 << 20) : (256 << 20)) + (8 << 20);
  o.timeout_sec = 120;
  o.job_timeout_sec = 900;
  auto r = hptest::RunJob(2, [&](int rank, int n) { Body(rank, n, out, quick); }, o);
  if (!r.AllOk()) {
    std::fprintf(stderr, "benchmark job failed: %s\n", r.Describe().c_str());
    return 1;
  }
  return 0;
}
