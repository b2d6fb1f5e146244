"""The RFC's quick-start example 2 (fused AllGather + MatMul) in MindSpore, on CPU — an op the
RFC's v1.0.0 never shipped for MindSpore. Checked against MindSpore's own all-gather
(``all_gather_object`` over mccl: the tensor all-gather kernels are not in the CPU build).

The RFC's shapes; bfloat16 instead of float16 (MindSpore's CPU float16 matmul is far slower).
Run:  msrun --worker_num 2 --local_worker_num 2 --join True examples/mindspore/fused_all_gather_matmul.py
"""

import mindspore as ms
import numpy as np
from mindspore.communication import get_group_size, get_rank, init
from mindspore.mint.distributed import all_gather_object

import hyper_parallel.core.symmetric_memory as symm

init()
rank, world_size = get_rank(), get_group_size()
dtype = ms.bfloat16

m_local, k, n = 512, 1024, 2048
m_total = m_local * world_size

a = ms.Tensor(np.random.default_rng(rank).standard_normal((m_local, k)).astype(np.float32)).astype(dtype)
b = ms.Tensor(np.random.default_rng(1234).standard_normal((k, n)).astype(np.float32)).astype(dtype)

gather_out = symm.empty((m_total, k), dtype=dtype)
signal = symm.empty(world_size * 4, dtype=ms.int32)
signal[:] = 0

symm.barrier()

gather_result, matmul_result = symm.fused_all_gather_matmul(a, b, None, gather_out, signal, block_size=128)
# gather_result: (m_total, k)  matmul_result: (m_total, n)

pieces = [None] * world_size
all_gather_object(pieces, a.astype(ms.float32).asnumpy())
rows = [0, m_local - 1, m_local, m_total - 1]  # spot-check rows of every rank's part
g = gather_result.astype(ms.float32).asnumpy()
e = np.concatenate(pieces)
want_rows = e[rows] @ b.astype(ms.float32).asnumpy()
got_rows = matmul_result.astype(ms.float32).asnumpy()[rows]
ok = np.array_equal(g, e) and np.allclose(got_rows, want_rows, rtol=2e-2, atol=5e-1)
print(
    f"rank {rank}: gather_out {tuple(gather_result.shape)} and c {tuple(matmul_result.shape)} "
    f"{'match' if ok else 'DIFFER FROM'} mindspore all_gather + matmul",
    flush=True,
)
symm.barrier()
symm.finalize()
assert ok
