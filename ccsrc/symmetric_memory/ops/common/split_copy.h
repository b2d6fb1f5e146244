// Splits one copy of `bytes` into at most `block_dim` page-aligned pieces and
// runs `piece(offset, length)` for each on the runtime's worker threads.
#pragma once

#include <algorithm>
#include <cstddef>

#include "hpshmem/parallel.h"
#include "hpshmem/status.h"

namespace hpshmem::ops {

constexpr size_t kMinBytesPerThread = size_t{2} << 20;

// Number of pieces worth running in parallel for `bytes` at `block_dim`.
inline int PieceCount(size_t bytes, int block_dim) {
  if (block_dim <= 0) block_dim = DefaultBlockDim();
  size_t by_size = bytes / kMinBytesPerThread;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(block_dim), by_size)));
}

template <class Piece>
Status SplitCopy(size_t bytes, int pieces, Piece&& piece) {
  // Page-aligned piece boundaries keep two threads off the same page.
  size_t per = ((bytes + pieces - 1) / pieces + 4095) & ~size_t{4095};
  return ParallelFor(pieces, [&](int i) -> Status {
    size_t begin = std::min(bytes, per * static_cast<size_t>(i));
    size_t end = std::min(bytes, begin + per);
    return piece(begin, end - begin);
  });
}

}  // namespace hpshmem::ops
