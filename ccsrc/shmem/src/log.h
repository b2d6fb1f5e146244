// Minimal leveled logging to stderr; the level comes from
// HYPER_PARALLEL_SHMEM_LOG_LEVEL (error|warn|info|debug), read at Init.
#pragma once

namespace hpshmem {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Rank shown in each line's prefix; -1 before Init.
void SetLogRank(int rank);
void Logf(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace hpshmem

#define HP_LOG(level, ...)                                                                                          \
  do {                                                                                                              \
    if (static_cast<int>(level) <= static_cast<int>(::hpshmem::GetLogLevel())) ::hpshmem::Logf(level, __VA_ARGS__); \
  } while (0)
#define HP_WARN(...) HP_LOG(::hpshmem::LogLevel::kWarn, __VA_ARGS__)
#define HP_INFO(...) HP_LOG(::hpshmem::LogLevel::kInfo, __VA_ARGS__)
#define HP_DEBUG(...) HP_LOG(::hpshmem::LogLevel::kDebug, __VA_ARGS__)
