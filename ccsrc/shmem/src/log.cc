#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace hpshmem {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
std::atomic<int> g_rank{-1};
const char* const kNames[] = {"ERROR", "WARN", "INFO", "DEBUG"};
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
void SetLogRank(int rank) { g_rank.store(rank); }

void Logf(LogLevel level, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  // One fprintf per line so lines of concurrent ranks do not interleave.
  fprintf(stderr, "[hpshmem rank %d] %s: %s\n", g_rank.load(), kNames[static_cast<int>(level)], msg);
}

}  // namespace hpshmem
