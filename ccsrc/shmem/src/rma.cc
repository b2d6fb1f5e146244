// Put, get, fence, quiet: validated here, carried by the peer's transport.
#include "copy.h"
#include "runtime.h"

namespace hpshmem {

Status PutMem(void* dest, const void* src, size_t bytes, int pe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("PutMem");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckPe(rt, pe, "PutMem"));
  HPSHMEM_RETURN_IF_ERROR(SymOffset(rt, dest, bytes, "PutMem dest", &off));
  if (bytes && !src) return Status::InvalidArgument("PutMem: src is null");
  if (!bytes) return Status::OK();
  return rt->route[pe]->Put(pe, kSymOffset + off, src, bytes);
}

Status PutMemNbi(void* dest, const void* src, size_t bytes, int pe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("PutMemNbi");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckPe(rt, pe, "PutMemNbi"));
  HPSHMEM_RETURN_IF_ERROR(SymOffset(rt, dest, bytes, "PutMemNbi dest", &off));
  if (bytes && !src) return Status::InvalidArgument("PutMemNbi: src is null");
  if (!bytes) return Status::OK();
  return rt->route[pe]->PutNbi(pe, kSymOffset + off, src, bytes);
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
