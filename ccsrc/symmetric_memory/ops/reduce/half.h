// Half-precision storage types and their conversions to and from float32
// (round to nearest even; NaN stays NaN), shared by the reductions and the
// MoE combine.
#pragma once

#include <cstdint>
#include <cstring>

namespace hpshmem::ops {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline float ToFloat(Half h) {
  _Float16 f;
  std::memcpy(&f, &h.bits, 2);
  return static_cast<float>(f);
}
inline Half FromFloat(float v, Half*) {
  _Float16 f = static_cast<_Float16>(v);
  Half h;
  std::memcpy(&h.bits, &f, 2);
  return h;
}
inline float ToFloat(BFloat16 b) {
  uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline BFloat16 FromFloat(float v, BFloat16*) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1);
  return BFloat16{static_cast<uint16_t>(u >> 16)};
}

}  // namespace hpshmem::ops
