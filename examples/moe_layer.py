"""An expert-parallel mixture-of-experts layer trained for a few steps: a router picks each token's
top-2 of 8 experts, shmem_moe_dispatch sends the token to the ranks owning them, each rank runs
its experts on their rows (grouped by expert), and shmem_moe_combine sums the weighted outputs
back on the token's rank. Gradients flow to the tokens, the router and the experts through both
calls. The first forward pass is checked against the same layer computed on one rank from every
expert's weights.
Run:  torchrun --nproc-per-node 2 examples/moe_layer.py
"""

import torch
import torch.distributed as dist

import hyper_parallel.core.symmetric_memory as symm

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
hidden, num_experts, topk, tokens = 64, 8, 2, 96
local = num_experts // world

torch.manual_seed(0)  # the router is replicated: the same weights on every rank
router = torch.nn.Linear(hidden, num_experts, bias=False)
torch.manual_seed(100 + rank)  # the experts are this rank's own
experts = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden) for _ in range(local))
opt = torch.optim.SGD(list(router.parameters()) + list(experts.parameters()), lr=0.5)
buf = symm.shmem_moe_buffer(tokens, hidden, torch.float32, num_experts, topk)

g = torch.Generator().manual_seed(rank)
x = torch.randn(tokens, hidden, generator=g)
target = torch.tanh(x.roll(1, dims=1))


def moe(x):
    probs = router(x).softmax(dim=-1)
    weights, idx = probs.topk(topk, dim=-1)
    recv_x, recv_idx, recv_w, per_expert, handle = symm.shmem_moe_dispatch(
        x, idx, weights, buffer=buf, layout="expert_major"
    )
    rows = torch.split(recv_x, per_expert.tolist())  # one block of rows per local expert
    y = torch.cat([torch.nn.functional.gelu(e(r)) for e, r in zip(experts, rows)])
    return symm.shmem_moe_combine(y, handle, topk_weights=recv_w), weights, idx


def reference(x, weights, idx):
    """The layer on this rank alone, from every rank's expert weights."""
    params = []
    for e in experts:
        for p in (e.weight, e.bias):
            parts = [torch.empty_like(p) for _ in range(world)]
            dist.all_gather(parts, p.detach())
            params.append(parts)
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(topk):
            e = int(idx[t, j])
            w, b = params[2 * (e % local)][e // local], params[2 * (e % local) + 1][e // local]
            out[t] += weights[t, j] * torch.nn.functional.gelu(x[t] @ w.T + b)
    return out


losses = []
for step in range(20):
    opt.zero_grad()
    out, weights, idx = moe(x)
    if step == 0:
        want = reference(x, weights.detach(), idx)
        assert torch.allclose(out, want, rtol=1e-5, atol=1e-5), f"rank {rank}: forward differs from the reference"
    loss = (out - target).square().mean()
    loss.backward()
    for p in router.parameters():  # the replicated router: average its gradient
        dist.all_reduce(p.grad)
        p.grad /= world
    opt.step()
    losses.append(loss.item())

print(f"rank {rank}: loss {losses[0]:.4f} -> {losses[-1]:.4f} over {len(losses)} steps", flush=True)
assert losses[-1] < losses[0], "the loss did not fall"
if rank == 0:
    print("moe_layer OK", flush=True)
symm.finalize()
dist.destroy_process_group()
