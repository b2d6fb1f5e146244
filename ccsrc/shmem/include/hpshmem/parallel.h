// Worker threads that split one operation's bytes (the RFC's block_dim AIV
// cores). Owned by the runtime: started lazily, joined at Finalize.
#pragma once

#include <functional>

#include "hpshmem/status.h"

namespace hpshmem {

// Runs fn(i) for every i in [0, n) on up to n threads, the calling thread
// being one of them, and returns the first non-OK Status. When the pool is
// busy with another thread's work the calls run inline on the caller, so
// concurrent callers never wait for each other. n is capped at 64.
Status ParallelFor(int n, const std::function<Status(int)>& fn);

// The block_dim used when an op is given 0: $HYPER_PARALLEL_SHMEM_BLOCK_DIM
// or InitAttr::block_dim (default 1).
int DefaultBlockDim();

}  // namespace hpshmem
