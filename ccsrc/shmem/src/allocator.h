// Deterministic first-fit allocator over heap OFFSETS (bytes). Every rank
// runs the same sequence of calls on its own instance, so the same calls
// yield the same offsets everywhere; the runtime verifies the sequence.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "hpshmem/status.h"

namespace hpshmem {

class OffsetAllocator {
 public:
  explicit OffsetAllocator(size_t capacity);

  // `alignment` must be a power of two >= 1. bytes == 0 takes one aligned
  // slot, so every allocation has a distinct address. Errors: kOutOfMemory.
  Status Allocate(size_t bytes, size_t alignment, size_t* offset);
  // Errors: kInvalidFree (not a live allocation start).
  Status Release(size_t offset);
  // Size of the live allocation that starts at `offset`, or 0.
  size_t LiveSize(size_t offset) const;
  // Whether [offset, offset + bytes) lies within the bytes one live allocation asked for.
  bool WithinLive(size_t offset, size_t bytes) const;
  // Takes a live allocation out of use without making its bytes allocatable:
  // something outside the allocator still references them. Reclaim (any time
  // later, in the same order on every rank) makes them free. Errors as Release.
  Status Retire(size_t offset);
  Status Reclaim(size_t offset);

  size_t capacity() const { return capacity_; }
  size_t bytes_live() const { return live_bytes_; }
  size_t bytes_peak() const { return peak_bytes_; }
  size_t bytes_retired() const { return retired_bytes_; }
  size_t retired_count() const { return retired_.size(); }
  size_t largest_free() const;
  const std::map<size_t, size_t>& live() const { return live_; }

 private:
  size_t capacity_;
  std::map<size_t, size_t> free_;     // offset -> length, non-adjacent
  std::map<size_t, size_t> live_;     // offset -> length taken (rounded up to 64)
  std::map<size_t, size_t> retired_;  // offset -> length: neither live nor free
  std::map<size_t, size_t> asked_;    // live offset -> bytes requested (live_ holds them rounded up)
  size_t live_bytes_ = 0, peak_bytes_ = 0, retired_bytes_ = 0;

  void AddFree(size_t start, size_t len);
};

}  // namespace hpshmem
