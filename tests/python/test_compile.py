"""The API inside ``torch.compile(fullgraph=True)`` (inductor, CPU), in real multi-process torch jobs.

A step that uses every operation runs 100 times eagerly and 100 times compiled on the same
inputs; every output of every iteration must be bit-identical. Ordering is what makes that
hold: a wait moved before its put, or a read of the receive buffer moved before the wait, or a
barrier dropped, gives other values (or hangs, which the job's timeout turns into a failure).
"""

import os

import pytest
from launcher import assert_job_ok

HERE = os.path.abspath(__file__)


def _expect(exc_type, fragment, fn, *args):
    try:
        fn(*args)
    except exc_type as e:
        assert fragment in str(e), f"message {str(e)!r} does not name {fragment!r}"
        return
    raise AssertionError(f"{fn} did not raise {exc_type.__name__} ({fragment})")


def scenario_compiled_equals_eager(rank, world, iters=100, n=37, m=6, k=5):
    import torch
    import torch._dynamo

    import hyper_parallel.core.symmetric_memory as symm

    to = (rank + 1) % world
    recv = symm.empty(n, dtype=torch.float32)
    sig = symm.empty(2, dtype=torch.int64)
    gathered = symm.empty(world * n, dtype=torch.float32)
    counts = [(p + rank) % 3 + 1 for p in range(world)]  # uneven pieces: rank p sends counts'[p] to us
    a2a = symm.empty(3 * world, dtype=torch.float32)
    fsig = symm.empty(world * 2, dtype=torch.int64)
    gather_out = symm.empty(world * m, k, dtype=torch.float32)
    rs_sig = symm.empty(world, dtype=torch.int64)
    slots = symm.empty(world * m * 4, dtype=torch.float32)
    red = symm.empty(n, dtype=torch.float32)
    scattered = torch.empty(n, dtype=torch.float32)
    for s in (sig, fsig, rs_sig):
        s.zero_()
    symm.barrier()
    b = torch.randn(k, 4, generator=torch.Generator().manual_seed(7))

    def step(x, epoch):
        y = x * 2 + 1  # exact in both modes (inductor's own kernels may round a sin() differently)
        symm.shmem_put_with_signal(recv, 0, y, 0, n, sig, 0, epoch, "set", to)
        seen = symm.shmem_wait_for_signal(recv, sig, 0, epoch, "ge")
        got = recv * 3  # a read the wait guards
        local = torch.full((n + 2,), -1.0)
        symm.shmem_get(local, 1, recv, 0, n, to)  # `to` holds what this rank put there
        symm.shmem_allgather(gathered, y)
        sends = [y[: (rank + p) % 3 + 1] * (p + 1) for p in range(world)]
        symm.shmem_alltoall(sends, a2a, counts)
        symm.shmem_signal_op(sig, 1, 1, "add", to)
        symm.shmem_wait_for_signal(None, sig, 1, epoch, "ge")
        symm.shmem_put(red, 0, y, 0, n, rank)  # filled by a library call: see docs/torch-compile.md on in-place writes
        symm.shmem_allreduce(red, "sum")
        symm.shmem_reduce_scatter(scattered, gathered, "max")
        symm.shmem_broadcast(red, world - 1)
        g, c = symm.fused_all_gather_matmul(y[: m * k].reshape(m, k), b, None, gather_out, fsig, 3)
        rs = symm.fused_matmul_reduce_scatter(g, b, slots, rs_sig, "sum")
        symm.barrier()  # no rank's next put lands in `recv` before its owner has read it
        # Results are computed from the buffers, not cloned: inductor (2.13) drops a clone of a buffer
        # that a custom op mutated and returns the buffer itself (see docs/torch-compile.md).
        return got, local, gathered * 2, a2a * 2, c, rs, red * 1, scattered * 1, seen

    def run(fn, i, epoch):
        # Poisoned before each call (in place writes to symmetric tensors belong outside compiled
        # code, see docs/torch-compile.md); a peer writes this rank's outputs only once this rank has entered.
        a2a.fill_(-7.0)
        gathered.fill_(-9.0)
        return fn(x + i, epoch)

    x = torch.randint(-1000, 1000, (n,), generator=torch.Generator().manual_seed(100 + rank)).float() / 8
    # The same data both times; the compiled run continues the signals' epochs (never reset).
    eager = [run(step, i, i + 1) for i in range(iters)]
    compiled_step = torch.compile(step, fullgraph=True, backend="inductor")
    compiled = [run(compiled_step, i, iters + i + 1) for i in range(iters)]
    for i, (e, c) in enumerate(zip(eager, compiled)):
        for j, (ev, cv) in enumerate(zip(e[:-1], c[:-1])):
            assert cv.dtype == ev.dtype and cv.shape == ev.shape, f"iteration {i} output {j}"
            assert torch.equal(cv, ev), f"iteration {i} output {j}: compiled {cv} != eager {ev}"
        assert int(c[-1]) >= iters + i + 1 and e[-1] >= i + 1
    explained = torch._dynamo.explain(step)(x, 2 * iters + 1)
    assert explained.graph_break_count == 0, explained.break_reasons
    symm.barrier()


def scenario_compiled_errors(rank, world):
    import torch

    import hyper_parallel.core.symmetric_memory as symm

    buf = symm.empty(8, dtype=torch.float32)
    sig = symm.empty(1, dtype=torch.int64)
    sig.zero_()
    buf.fill_(5.0)
    symm.barrier()

    @torch.compile(fullgraph=True)
    def put_to(rank_arg, src):
        symm.shmem_put(buf, 0, src, 0, 8, rank_arg)

    @torch.compile(fullgraph=True)
    def signal_with(op):
        symm.shmem_signal_op(sig, 0, 1, op, (rank + 1) % world)

    @torch.compile(fullgraph=True)
    def put_too_much(src):
        symm.shmem_put(buf, 4, src, 0, 5, (rank + 1) % world)

    _expect(symm.ShmemValueError, "target_rank", put_to, world, torch.ones(8))
    _expect(symm.ShmemValueError, "signal_op", signal_with, "mul")
    _expect(symm.ShmemValueError, "size", put_too_much, torch.ones(8))
    _expect(symm.ShmemTypeError, "signal_op must be an int", signal_with, 1.5)
    _expect(symm.ShmemTypeError, "target_rank must be an int", put_to, "1", torch.ones(8))
    _expect(symm.ShmemTypeError, "dtype", put_to, (rank + 1) % world, torch.ones(8, dtype=torch.float64))
    symm.barrier()
    assert torch.equal(buf, torch.full((8,), 5.0)), "a rejected call wrote"
    assert int(sig[0]) == 0, "a rejected signal landed"
    symm.barrier()

    # The RFC's one-element tensor arguments (and an IntEnum) work compiled too.
    @torch.compile(fullgraph=True)
    def put_signal_tensor_args(src, off, size, value, peer):
        symm.shmem_put_with_signal(buf, off, src, 1, size, sig, 0, value, symm.SignalOp.SET, peer)

    src = torch.arange(8, dtype=torch.float32) + 10 * rank
    i64 = lambda v: torch.tensor([v], dtype=torch.int64)  # noqa: E731
    put_signal_tensor_args(src, i64(2), i64(3), i64(7), i64((rank + 1) % world))
    seen = symm.shmem_wait_for_signal(buf, sig, 0, 7, "eq")
    frm = (rank - 1) % world
    want = torch.full((8,), 5.0)
    want[2:5] = torch.arange(1, 4, dtype=torch.float32) + 10 * frm
    assert seen == 7 and torch.equal(buf, want), f"{seen} {buf}"
    symm.barrier()


def scenario_compiled_groups(rank, world, iters=20, n=29):
    """Group collectives compiled (a list of ranks and a torch ProcessGroup): the same bits as eager;
    rank 1, outside the group, only joins the job's barrier at the end."""
    import torch
    import torch._dynamo
    import torch.distributed as dist

    import hyper_parallel.core.symmetric_memory as symm

    pg = dist.new_group([0, 2])  # collective over the job: every rank makes it
    ranks = [2, 0]  # group rank 0 is rank 2 here
    buf = symm.empty(n, dtype=torch.float32)
    gathered = symm.empty(2 * n, dtype=torch.float32)
    out = symm.empty(n, dtype=torch.float32)
    symm.barrier()
    if rank != 1:
        # Inputs are written outside the compiled function (in-place writes inside reach the ops
        # as copies: see the limits in docs/torch-compile.md).
        def step(i):
            symm.shmem_allreduce(buf, "sum", group=pg)
            symm.shmem_allgather(gathered, buf, group=ranks)
            symm.shmem_broadcast(out, 0, group=ranks)
            symm.barrier(group=pg)
            return gathered * 0.5 + out.sum() + i

        def prepare(i):
            buf.copy_(torch.arange(n, dtype=torch.float32) * (rank + 1) + i)
            out.copy_(torch.full((n,), 100.0 * rank + i))

        compiled = torch.compile(step, fullgraph=True, backend="inductor")
        for i in range(iters):
            prepare(i)
            want = step(i)
            prepare(i)
            got = compiled(i)
            assert torch.equal(got, want), f"iteration {i}"
            summed = torch.arange(n, dtype=torch.float32) * 4 + 2 * i  # ranks 0 and 2: factors 1 + 3
            assert torch.equal(buf, summed) and torch.equal(gathered, torch.cat([summed, summed]))
            assert torch.equal(out, torch.full((n,), 200.0 + i)), "broadcast from group rank 0 (rank 2)"
        explained = torch._dynamo.explain(step)(0)
        assert explained.graph_break_count == 0, explained.break_reasons
    symm.barrier()


@pytest.mark.parametrize("world", [2, 3])
def test_compiled_step_is_bit_identical_to_eager(world):
    assert_job_ok(HERE, "scenario_compiled_equals_eager", world, timeout=600)


def test_bad_arguments_inside_a_compiled_function_raise_the_documented_errors():
    assert_job_ok(HERE, "scenario_compiled_errors", 2, timeout=300)


def test_group_collectives_compile_to_the_same_bits():
    assert_job_ok(HERE, "scenario_compiled_groups", 3, timeout=600)


def scenario_compiled_moe(rank, world, steps=3):
    """A MoE layer (router, dispatch, experts, weighted combine) forward and backward, compiled
    with fullgraph=True, against eager on the same inputs: loss and every gradient; the MoE
    calls become the library's operators (no graph break), with 0 tokens on one rank."""
    import torch
    import torch._dynamo

    import hyper_parallel.core.symmetric_memory as symm
    from hyper_parallel.platform.torch.symmetric_memory import _compile_moe

    hidden, experts, k = 6, 2 * world, 3
    tokens = [13, 0, 7, 5][rank]
    buf = symm.shmem_moe_buffer(16, hidden, torch.float32, experts, k)
    g = torch.Generator().manual_seed(rank)
    x0, w0, r0 = (
        torch.randn(tokens, hidden, generator=g),
        torch.randn(hidden, hidden, generator=g),
        torch.randn(hidden, experts, generator=g),
    )

    def layer(x, w, r, layout, weighted):
        probs, idx = (x @ r).softmax(-1).topk(k)
        recv_x, recv_idx, recv_w, counts, h = symm.shmem_moe_dispatch(
            x, idx, probs if weighted else None, buffer=buf, layout=layout, expert_alignment=2
        )
        y = torch.tanh(recv_x @ w)
        out = symm.shmem_moe_combine(y, h, topk_weights=recv_w)
        return (out * out).sum() + (probs.sum() if not weighted else 0)

    compiled = torch.compile(layer, fullgraph=True)
    for layout in ("rank_major", "expert_major"):
        for weighted in (True, False):
            for step in range(steps):
                res = []
                for fn in (layer, compiled):
                    x, w, r = (t.clone().requires_grad_() for t in (x0 + step, w0, r0))
                    loss = fn(x, w, r, layout, weighted)
                    loss.backward()
                    res.append((loss.detach(), x.grad, w.grad, r.grad))
                for name, a, b in zip(("loss", "x.grad", "w.grad", "router.grad"), *res):
                    assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), (
                        f"rank {rank} {layout} weighted={weighted} step {step}: {name} differs by {(a - b).abs().max()}"
                    )
    # fullgraph=True raises on any graph break; these are the operators' own calls.
    assert len(_compile_moe._handles) == 4 * steps, "the compiled steps did not run the MoE operators"
    symm.barrier()


def test_compiled_moe_layer_forward_and_backward_match_eager():
    assert_job_ok(HERE, "scenario_compiled_moe", 3, timeout=600)
