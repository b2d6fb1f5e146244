#include "copy.h"

#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace hpshmem {
namespace {

// Bytes of the level-3 cache this CPU shares, from sysfs (what the kernel
// was told); sysconf's CPUID-based figure can be the whole host's in a VM
// (320 MiB on the reference VM, whose cores share 32 MiB). 0 if unknown.
size_t L3Bytes() {
  for (int i = 0; i < 8; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level(dir + "level"), size(dir + "size");
    int lv = 0;
    std::string text;
    if (!(level >> lv) || lv != 3 || !(size >> text)) continue;
    char* unit = nullptr;
    size_t v = std::strtoull(text.c_str(), &unit, 10);  // "32768K"; no exceptions on odd text
    return *unit == 'K' ? v << 10 : *unit == 'M' ? v << 20 : v;
  }
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? static_cast<size_t>(l3) : 0;
}

// A quarter of the last-level cache, and never under 8 MiB: below that the
// destination (and the reader's next look at it) stays in cache, where a
// regular copy is faster than any stream to memory.
size_t ComputeThreshold() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) return SIZE_MAX;
  return std::max<size_t>(size_t{8} << 20, L3Bytes() / 4);
#else
  return SIZE_MAX;
#endif
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) void StreamCopy(char* d, const char* s, size_t n) {
  size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;  // align the stores to lines
  head = std::min(head, n);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  size_t blocks = n / 128;
  for (size_t i = 0; i < blocks; ++i, s += 128, d += 128) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  _mm_sfence();
  std::memcpy(d, s, n - blocks * 128);
}
#endif

}  // namespace

size_t StreamingCopyThreshold() {
  static const size_t threshold = ComputeThreshold();
  return threshold;
}

void CopyBytes(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;  // an empty buffer's pointer may be null, which memmove may not be given
#if defined(__x86_64__)
  if (bytes >= StreamingCopyThreshold()) {
    auto* d = static_cast<char*>(dst);
    auto* s = static_cast<const char*>(src);
    if (d + bytes <= s || s + bytes <= d) {
      StreamCopy(d, s, bytes);
      return;
    }
  }
#endif
  std::memmove(dst, src, bytes);
}

}  // namespace hpshmem
