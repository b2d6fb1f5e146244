// SipHash-2-4 (Aumasson & Bernstein): a keyed PRF, used as the MAC that
// proves knowledge of the per-job secret during the bootstrap handshake.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpshmem {

uint64_t SipHash24(const uint8_t key[16], const void* data, size_t len);

// Compares two MACs in constant time (no early exit on the first differing
// byte), so a stranger cannot learn a MAC a byte at a time. Every handshake
// check of a MAC goes through this.
inline bool MacEqual(uint64_t a, uint64_t b) {
  volatile uint64_t d = a ^ b;
  return d == 0;
}

}  // namespace hpshmem
