#include "siphash.h"

#include <cstring>

namespace hpshmem {
namespace {

inline uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // little-endian hosts only (x86-64, aarch64)
  return v;
}

struct State {
  uint64_t v0, v1, v2, v3;
  void Round() {
    v0 += v1;
    v1 = Rotl(v1, 13);
    v1 ^= v0;
    v0 = Rotl(v0, 32);
    v2 += v3;
    v3 = Rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = Rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = Rotl(v1, 17);
    v1 ^= v2;
    v2 = Rotl(v2, 32);
  }
};

}  // namespace

uint64_t SipHash24(const uint8_t key[16], const void* data, size_t len) {
  const uint8_t* in = static_cast<const uint8_t*>(data);
  uint64_t k0 = Load64(key), k1 = Load64(key + 8);
  State s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL, k0 ^ 0x6c7967656e657261ULL,
          k1 ^ 0x7465646279746573ULL};
  size_t full = len - (len % 8);
  for (size_t i = 0; i < full; i += 8) {
    uint64_t m = Load64(in + i);
    s.v3 ^= m;
    s.Round();
    s.Round();
    s.v0 ^= m;
  }
  uint64_t b = static_cast<uint64_t>(len) << 56;
  for (size_t i = 0; i < len % 8; ++i) b |= static_cast<uint64_t>(in[full + i]) << (8 * i);
  s.v3 ^= b;
  s.Round();
  s.Round();
  s.v0 ^= b;
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.Round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace hpshmem
