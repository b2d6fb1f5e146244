"""The expert-parallel MoE layer of examples/moe_layer.py in MindSpore (PyNative), trained for a
few steps under msrun: a router picks each token's top-2 of 8 experts, shmem_moe_dispatch sends
the token to the ranks owning them, each rank runs its experts on their rows, and
shmem_moe_combine sums the weighted outputs back; mindspore.value_and_grad trains the router and
the experts through both calls (their bprops send the gradients back along the same routes).
Run:  msrun --worker_num 2 --local_worker_num 2 --join True examples/mindspore/moe_layer.py
"""

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore.communication import get_group_size, get_rank, init

import hyper_parallel.core.symmetric_memory as symm

init()
rank, world = get_rank(), get_group_size()
hidden, num_experts, topk, tokens = 32, 8, 2, 48
local = num_experts // world
buf = symm.shmem_moe_buffer(tokens, hidden, ms.float32, num_experts, topk)

g = np.random.default_rng(0)  # the router is replicated: the same weights on every rank
router = Parameter(Tensor(g.standard_normal((hidden, num_experts)).astype(np.float32) * 0.1), name="router")
g = np.random.default_rng(100 + rank)  # the experts are this rank's own
experts = [
    Parameter(Tensor(g.standard_normal((hidden, hidden)).astype(np.float32) / hidden**0.5), name=f"expert{e}")
    for e in range(local)
]
x = Tensor(np.random.default_rng(rank).standard_normal((tokens, hidden)).astype(np.float32))
target = ops.tanh(ops.concat((x[:, -1:], x[:, :-1]), 1))  # x rolled by one column (no CPU Roll kernel)
params = [router] + experts
opt = nn.SGD(params, learning_rate=0.5)


def loss_fn(x):
    probs = ops.softmax(ops.matmul(x, router), -1)
    weights, idx = ops.topk(probs, topk)
    recv_x, _, recv_w, per_expert, handle = symm.shmem_moe_dispatch(x, idx, weights, buffer=buf, layout="expert_major")
    counts = [int(c) for c in per_expert.asnumpy()]
    blocks, at = [], 0
    for e, n in enumerate(counts):  # one block of rows per local expert
        blocks.append(ops.tanh(ops.matmul(recv_x[at : at + n], experts[e])))
        at += n
    y = ops.concat(blocks) if blocks else recv_x
    out = symm.shmem_moe_combine(y, handle, topk_weights=recv_w)
    return ((out - target) ** 2).mean()


grad_fn = ms.value_and_grad(loss_fn, None, params)
allreduce = ops.AllReduce()
losses = []
for _ in range(20):
    loss, grads = grad_fn(x)
    grads = list(grads)
    grads[0] = allreduce(grads[0]) / world  # the replicated router: average its gradient
    opt(tuple(grads))
    losses.append(float(loss.asnumpy()))

print(f"rank {rank}: loss {losses[0]:.4f} -> {losses[-1]:.4f} over {len(losses)} steps", flush=True)
symm.finalize()  # collective: before the check, so one rank's failure does not leave the others waiting
assert losses[-1] < losses[0], "the loss did not fall"
if rank == 0:
    print("moe_layer OK", flush=True)
