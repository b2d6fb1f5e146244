#include "allocator.h"

#include <algorithm>

namespace hpshmem {

namespace {
constexpr size_t kGranule = 64;  // every block starts and ends on a cache line
size_t RoundUp(size_t v, size_t a) { return (v + a - 1) & ~(a - 1); }
}  // namespace

OffsetAllocator::OffsetAllocator(size_t capacity) : capacity_(capacity & ~(kGranule - 1)) {
  if (capacity_) free_[0] = capacity_;
}

Status OffsetAllocator::Allocate(size_t bytes, size_t alignment, size_t* offset) {
  alignment = std::max(alignment, kGranule);
  if (bytes > capacity_) {
    return Status::OutOfMemory("request of " + std::to_string(bytes) + " bytes exceeds the whole heap");
  }
  size_t len = RoundUp(std::max<size_t>(bytes, 1), kGranule);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    size_t start = it->first, flen = it->second;
    size_t aligned = RoundUp(start, alignment);
    if (aligned < start || aligned - start > flen || flen - (aligned - start) < len) continue;
    // Carve [aligned, aligned + len) out of [start, start + flen).
    size_t head = aligned - start, tail = flen - head - len;
    free_.erase(it);
    if (head) free_[start] = head;
    if (tail) free_[aligned + len] = tail;
    live_[aligned] = len;
    asked_[aligned] = bytes;
    live_bytes_ += len;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    *offset = aligned;
    return Status::OK();
  }
  return Status::OutOfMemory("no free block of " + std::to_string(len) + " bytes (alignment " +
                             std::to_string(alignment) + ")");
}

Status OffsetAllocator::Release(size_t offset) {
  auto it = live_.find(offset);
  if (it == live_.end()) {
    return Status::InvalidFree("heap offset " + std::to_string(offset) +
                               " is not the start of a live allocation (double free or foreign pointer)");
  }
  size_t len = it->second;
  live_bytes_ -= len;
  live_.erase(it);
  asked_.erase(offset);
  AddFree(offset, len);
  return Status::OK();
}

Status OffsetAllocator::Retire(size_t offset) {
  auto it = live_.find(offset);
  if (it == live_.end()) {
    return Status::InvalidFree("heap offset " + std::to_string(offset) +
                               " is not the start of a live allocation (double free or foreign pointer)");
  }
  live_bytes_ -= it->second;
  retired_bytes_ += it->second;
  retired_[offset] = it->second;
  live_.erase(it);
  asked_.erase(offset);
  return Status::OK();
}

Status OffsetAllocator::Reclaim(size_t offset) {
  auto it = retired_.find(offset);
  if (it == retired_.end()) {
    return Status::InvalidFree("heap offset " + std::to_string(offset) + " is not a retired allocation");
  }
  size_t len = it->second;
  retired_bytes_ -= len;
  retired_.erase(it);
  AddFree(offset, len);
  return Status::OK();
}

void OffsetAllocator::AddFree(size_t start, size_t len) {
  // Coalesce with the neighbours on both sides.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && start + len == next->first) {
    len += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = len;
}

size_t OffsetAllocator::LiveSize(size_t offset) const {
  auto it = live_.find(offset);
  return it == live_.end() ? 0 : it->second;
}

bool OffsetAllocator::WithinLive(size_t offset, size_t bytes) const {
  auto it = asked_.upper_bound(offset);
  if (it == asked_.begin()) return false;
  --it;
  return offset - it->first <= it->second && bytes <= it->second - (offset - it->first);
}

size_t OffsetAllocator::largest_free() const {
  size_t m = 0;
  for (auto& [o, l] : free_) m = std::max(m, l);
  return m;
}

}  // namespace hpshmem
