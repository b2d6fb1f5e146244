"""A ring all-reduce written with one-sided puts and signals, checked against gloo.

Each rank pushes a chunk to its right neighbour with shmem_put_with_signal and waits
for the chunk from its left neighbour: no receives are posted, no rank waits for a
matching call. Run:  torchrun --nproc-per-node 4 examples/ring.py
"""

import torch
import torch.distributed as dist

import hyper_parallel.core.symmetric_memory as symm

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
n = 1 << 16  # elements per rank (divisible by world for the chunking below)
n -= n % world
chunk = n // world

torch.manual_seed(rank)
x = torch.randn(n, dtype=torch.float32)
expected = x.clone()
dist.all_reduce(expected)  # the reference

inbox = symm.empty(2 * world, chunk, dtype=torch.float32)  # one slot per step
arrived = symm.empty(2 * world, dtype=torch.int64)  # one signal per step
arrived.zero_()
symm.barrier()

right, left = (rank + 1) % world, (rank - 1) % world
acc = x.clone().view(world, chunk)
# Reduce-scatter: after world-1 steps, rank r owns the full sum of chunk (r+1) % world.
for step in range(world - 1):
    send = (rank - step) % world
    symm.shmem_put_with_signal(inbox, step * chunk, acc[send], 0, chunk, arrived, step, 1, "set", right)
    symm.shmem_wait_for_signal(inbox, arrived, step, 1, "eq")
    recv = (left - step) % world
    acc[recv] += inbox[step]
# All-gather: pass the finished chunks around the ring.
for step in range(world - 1):
    s = world - 1 + step
    send = (rank + 1 - step) % world
    symm.shmem_put_with_signal(inbox, s * chunk, acc[send], 0, chunk, arrived, s, 1, "set", right)
    symm.shmem_wait_for_signal(inbox, arrived, s, 1, "eq")
    acc[(left + 1 - step) % world] = inbox[s]

ok = torch.allclose(acc.view(-1), expected, rtol=1e-5, atol=1e-5)
print(
    f"rank {rank}/{world}: one-sided ring all-reduce of {n} floats "
    f"{'matches' if ok else 'DIFFERS FROM'} gloo all_reduce "
    f"(to rank {right} through {symm.debug_state()['peer_transports'][right]})",
    flush=True,
)
symm.barrier()
symm.finalize()
dist.destroy_process_group()
assert ok
