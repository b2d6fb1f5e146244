// Put, get, fence, quiet: validated here, carried by the peer's transport.
#include "copy.h"
#include "runtime.h"

namespace hpshmem {

namespace {

// Validates a put to rank pe (named `fn` in errors, its destination
// `dest_what`), then hands the transport the segment offset: `go(transport, offset)`.
template <class Go>
Status CheckedPut(const char* fn, const char* dest_what, void* dest, const void* src, size_t bytes, int pe, Go&& go) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit(fn);
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckPe(rt, pe, fn));
  HPSHMEM_RETURN_IF_ERROR(SymOffset(rt, dest, bytes, dest_what, &off));
  if (bytes && !src) return Status::InvalidArgument(std::string(fn) + ": src is null");
  if (!bytes) return Status::OK();
  return go(rt->route[pe], kSymOffset + off);
}

}  // namespace

Status PutMem(void* dest, const void* src, size_t bytes, int pe) {
  return CheckedPut("PutMem", "PutMem dest", dest, src, bytes, pe,
                    [&](Transport* t, size_t off) { return t->Put(pe, off, src, bytes); });
}

Status PutMemNbi(void* dest, const void* src, size_t bytes, int pe) {
  return CheckedPut("PutMemNbi", "PutMemNbi dest", dest, src, bytes, pe,
                    [&](Transport* t, size_t off) { return t->PutNbi(pe, off, src, bytes); });
}

Status GetMem(void* dest, const void* src, size_t bytes, int pe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("GetMem");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckPe(rt, pe, "GetMem"));
  HPSHMEM_RETURN_IF_ERROR(SymOffset(rt, src, bytes, "GetMem src", &off));
  if (bytes && !dest) return Status::InvalidArgument("GetMem: dest is null");
  if (!bytes) return Status::OK();
  return rt->route[pe]->Get(pe, dest, kSymOffset + off, bytes);
}

Status Fence() {
  // Shared memory: streaming stores are weakly ordered. UCX: every verb to a
  // peer is a message on its one endpoint, applied in order there (under
  // UCX RMA puts complete before they return), so a local fence is all that
  // is left to order.
  StoreFence();
  return Status::OK();
}

Status Quiet() {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) {
    StoreFence();
    return Status::OK();
  }
  return rt->QuietAll();
}

}  // namespace hpshmem
