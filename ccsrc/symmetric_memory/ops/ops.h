// The RFC's kernels (ccsrc/symmetric_memory/ops/*) on CPU hosts: one-sided
// copies split across `block_dim` worker threads (the RFC's AIV cores), and
// the signal operations. Sizes are BYTES; pointers are raw addresses (the
// Python adapters convert elements and offsets before calling).
//
// Every op validates its whole request before writing anything; errors come
// from the runtime unchanged (see hpshmem/hpshmem.h for the codes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hpshmem/hpshmem.h"

namespace hpshmem::ops {

// block_dim: threads that split the bytes; 0 takes the runtime default
// ($HYPER_PARALLEL_SHMEM_BLOCK_DIM). Copies smaller than 2 MiB per thread
// run on the calling thread alone: below that, waking a thread costs more
// than it saves.

// target (symmetric) on rank pe  <-  src (any local memory), `bytes` bytes.
Status PutMem(void* target, const void* src, size_t bytes, int pe, int block_dim = 0);
// dst (any local memory)  <-  src (symmetric) on rank pe.
Status GetMem(void* dst, const void* src, size_t bytes, int pe, int block_dim = 0);
// Put, fence, then signal (SET or ADD) on rank pe's `sig`: a waiter that sees
// the signal sees all the data. Validates the signal before copying.
Status PutMemSignal(void* target, const void* src, size_t bytes, void* sig, SignalType type, int64_t value,
                    SignalOp op, int pe, int block_dim = 0);
// Atomic SET/ADD on rank pe's signal word.
Status SignalOpRemote(void* sig, SignalType type, int64_t value, SignalOp op, int pe);
// Blocks until the local signal compares true; see hpshmem::SignalWaitUntil.
Status SignalWaitUntil(const void* sig, SignalType type, Cmp cmp, int64_t value, int64_t* observed,
                       const char* label = nullptr);

}  // namespace hpshmem::ops
