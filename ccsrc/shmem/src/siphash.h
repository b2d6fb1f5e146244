// SipHash-2-4 (Aumasson & Bernstein): a keyed PRF, used as the MAC that
// proves knowledge of the per-job secret during the bootstrap handshake.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpshmem {

uint64_t SipHash24(const uint8_t key[16], const void* data, size_t len);

}  // namespace hpshmem
