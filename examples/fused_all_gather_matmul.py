"""The RFC's quick-start example 2 (fused AllGather + MatMul), on CPU.

Only the device string differs from the RFC. (float16 is the RFC's dtype; CPU float16 matmuls
are slow — bfloat16 runs about 300x faster here.) Checks the result against gloo.
Run:  torchrun --nproc-per-node 2 examples/fused_all_gather_matmul.py
"""

import torch
import torch.distributed as dist

import hyper_parallel.core.symmetric_memory as symm

dist.init_process_group("gloo")
rank, world_size = dist.get_rank(), dist.get_world_size()
device = "cpu"

m_local, k, n = 512, 1024, 2048
m_total = m_local * world_size

torch.manual_seed(rank)
a = torch.randn(m_local, k, dtype=torch.float16, device=device)
torch.manual_seed(1234)
b = torch.randn(k, n, dtype=torch.float16, device=device)

gather_out = symm.empty((m_total, k), dtype=torch.float16)
c = torch.zeros(m_total, n, dtype=torch.float16, device=device)
signal = symm.empty(world_size * 4, dtype=torch.int32)
signal.zero_()

dist.barrier()

gather_result, matmul_result = symm.fused_all_gather_matmul(a, b, c, gather_out, signal, block_size=128)
# gather_result: (m_total, k)  matmul_result: (m_total, n)

expected_gather = torch.empty(m_total, k, dtype=torch.float16)
dist.all_gather_into_tensor(expected_gather, a)
rows = torch.tensor([0, m_local - 1, m_local, m_total - 1])  # spot-check rows of every rank's part
expected_rows = expected_gather[rows].float() @ b.float()
ok = torch.equal(gather_result, expected_gather) and torch.allclose(
    matmul_result[rows].float(), expected_rows, rtol=2e-2, atol=2e-1
)
print(
    f"rank {rank}: gather_out {tuple(gather_result.shape)} and c {tuple(matmul_result.shape)} "
    f"{'match' if ok else 'DIFFER FROM'} gloo all_gather + matmul",
    flush=True,
)
symm.barrier()
symm.finalize()
dist.destroy_process_group()
assert ok
