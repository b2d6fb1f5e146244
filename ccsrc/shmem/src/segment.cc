#include "segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace hpshmem {

void* MapAligned(int fd, size_t bytes, size_t align, size_t skew) {
  // Reserve a larger range, map over its aligned part, give back the slack.
  size_t span = bytes + align;
  void* r = ::mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return MAP_FAILED;
  auto base = reinterpret_cast<uintptr_t>(r);
  // The first address at which base + skew is aligned.
  uintptr_t aligned = ((base + skew + align - 1) & ~(uintptr_t{align} - 1)) - skew;
  if (aligned < base) aligned += align;
  void* p = ::mmap(reinterpret_cast<void*>(aligned), bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED) {
    ::munmap(r, span);
    return MAP_FAILED;
  }
  if (aligned > base) ::munmap(r, aligned - base);
  uintptr_t end = aligned + bytes, rend = base + span;
  if (rend > end) ::munmap(reinterpret_cast<void*>(end), rend - end);
  return p;
}

void RetireMapping(void* addr, size_t bytes) {
  void* r = ::mmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) ::munmap(addr, bytes);  // out of mappings: at least never touch the heap again
}

Status LocalSegment::Create(size_t heap_bytes, int rank, int nranks, uint64_t job_id,
                            std::unique_ptr<LocalSegment>* out) {
  std::unique_ptr<LocalSegment> s(new LocalSegment());
  s->bytes_ = kHeaderBytes + heap_bytes;
  s->fd_.Reset(static_cast<int>(::memfd_create("hpshmem-heap", MFD_CLOEXEC | MFD_ALLOW_SEALING)));
  if (!s->fd_.valid()) return Status::FromErrno("memfd_create");
  // memfds start as 0777; owner-only keeps /proc/<pid>/fd/<n> closed to other users.
  if (::fchmod(s->fd(), 0600) != 0) return Status::FromErrno("fchmod of the heap segment");
  if (::ftruncate(s->fd(), static_cast<off_t>(s->bytes_)) != 0)
    return Status::FromErrno("ftruncate of the " + std::to_string(s->bytes_) + "-byte heap segment");
  ::fcntl(s->fd(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  // This rank's heap (kHeaderBytes in) starts kHeapAlign-aligned, so that any
  // alignment up to it holds at the same offset on every rank. The reservation
  // costs address space only.
  void* p = MapAligned(s->fd(), s->bytes_, kHeapAlign, kHeaderBytes);
  if (p == MAP_FAILED) return Status::FromErrno("mmap of the heap segment");
  s->base_ = static_cast<uint8_t*>(p);
  PeHeader* h = s->header();
  h->magic = kHeaderMagic;
  h->rank = rank;
  h->nranks = nranks;
  h->heap_bytes = heap_bytes;
  h->job_id = job_id;
  *out = std::move(s);
  return Status::OK();
}

LocalSegment::~LocalSegment() {
  if (base_) RetireMapping(base_, bytes_);
}

Status HostKey(const std::string& host_id, std::string* out) {
  if (!host_id.empty()) {
    if (host_id.size() > 60)
      return Status::InvalidArgument("HYPER_PARALLEL_SHMEM_HOST_ID='" + host_id + "' is longer than 60 characters");
    *out = "id:" + host_id;
    return Status::OK();
  }
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  struct stat st{};
  ::stat("/proc/self/ns/net", &st);
  *out = boot + "/" + std::to_string(static_cast<unsigned long long>(st.st_ino));
  return Status::OK();
}

}  // namespace hpshmem
