"""Scenarios of the torch.distributed backend ``hpshmem``, run by test_backend.py in real processes.

Every rank can regenerate every rank's input (seeded by rank, op, dtype and size), so each result is
checked against a reference computed here in float64 / exact integers, in rank order; outputs are
filled with poison first, and the ranks compare their results' bytes (bit-identical everywhere).
"""

from __future__ import annotations

import os
import time
import zlib

import torch
import torch.distributed as dist

POISON = 77


def init(rank, world, port, backend="hpshmem", **kw):
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, **kw)


def data(seed_parts, shape, dtype):
    g = torch.Generator().manual_seed(zlib.crc32(repr(seed_parts).encode()))
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)).to(dtype)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 4).to(dtype)
    lo, hi = (0, 50) if dtype is torch.uint8 else (-20, 20)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def poison_like(t):
    return torch.full_like(t, POISON if t.dtype is not torch.bool else True)


def same_everywhere(t: torch.Tensor, group=None):
    """Every member holds the same bytes (checked through the backend itself, as int64 words)."""
    raw = t.detach().contiguous().view(-1).view(torch.uint8)
    padded = torch.zeros(((raw.numel() + 7) // 8) * 8, dtype=torch.uint8)
    padded[: raw.numel()] = raw
    words = padded.view(torch.int64)
    hi, lo = words.clone(), words.clone()
    dist.all_reduce(hi, dist.ReduceOp.MAX, group=group)
    dist.all_reduce(lo, dist.ReduceOp.MIN, group=group)
    assert torch.equal(hi, lo), "ranks hold different results"


def close(got, want, dtype, what):
    if dtype.is_floating_point or dtype.is_complex:
        tol = {torch.float16: 2e-2, torch.bfloat16: 8e-2}.get(dtype, 1e-5)
        g = torch.view_as_real(got).double() if got.is_complex() else got.double()
        w = torch.view_as_real(want).double() if want.is_complex() else want.double()
        ok = torch.allclose(g, w, rtol=tol, atol=tol * max(1.0, float(w.abs().max()) if w.numel() else 1.0))
    else:
        ok = torch.equal(got, want)
    assert ok, f"{what}: got {got.flatten()[:8]} want {want.flatten()[:8]}"


REDUCE = {
    "sum": (dist.ReduceOp.SUM, lambda xs: _fold(xs, torch.add)),
    "avg": (dist.ReduceOp.AVG, None),
    "product": (dist.ReduceOp.PRODUCT, lambda xs: _fold(xs, torch.mul)),
    "min": (dist.ReduceOp.MIN, lambda xs: _fold(xs, torch.minimum)),
    "max": (dist.ReduceOp.MAX, lambda xs: _fold(xs, torch.maximum)),
    "band": (dist.ReduceOp.BAND, lambda xs: _fold(xs, torch.bitwise_and)),
    "bor": (dist.ReduceOp.BOR, lambda xs: _fold(xs, torch.bitwise_or)),
    "bxor": (dist.ReduceOp.BXOR, lambda xs: _fold(xs, torch.bitwise_xor)),
}


def _fold(xs, f):
    acc = xs[0]
    for x in xs[1:]:
        acc = f(acc, x)
    return acc


def reference(op, inputs, dtype):
    """The reduction of the ranks' inputs in rank order, in a wide type, as `dtype`."""
    if dtype is torch.bool:
        ints = [x.to(torch.int64) for x in inputs]
        r = {
            "sum": torch.stack(ints).amax(0),
            "product": torch.stack(ints).amin(0),
            "min": torch.stack(ints).amin(0),
            "max": torch.stack(ints).amax(0),
        }.get(op)
        if r is None:
            r = REDUCE[op][1](ints)
        return r.bool()
    wide = [
        x.to(torch.complex128 if dtype.is_complex else torch.float64 if dtype.is_floating_point else torch.int64)
        for x in inputs
    ]
    if op == "avg":
        s = _fold(wide, torch.add)
        r = (
            s / len(inputs)
            if (dtype.is_floating_point or dtype.is_complex)
            else torch.div(s, len(inputs), rounding_mode="trunc")
        )
    else:
        r = REDUCE[op][1](wide)
    if not (dtype.is_floating_point or dtype.is_complex):
        bits = torch.iinfo(dtype).bits
        r = r.to(torch.int64)
        if bits < 64:  # integers wrap
            r = torch.where(r >= 0, r, r + (1 << bits)) % (1 << bits)
            if dtype.is_signed:
                r = torch.where(r >= 1 << (bits - 1), r - (1 << bits), r)
    return r.to(dtype)


DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
]


def ops_for(dtype):
    if dtype is torch.bool:
        return ["sum", "product", "min", "max", "band", "bor", "bxor"]
    if dtype.is_complex:
        return ["sum", "avg"]  # torch itself refuses the others on complex tensors
    if dtype.is_floating_point:
        return ["sum", "avg", "product", "min", "max"]
    return ["sum", "product", "min", "max", "band", "bor", "bxor"]


def scenario_every_op(rank, world, port, sizes, dtypes=None, ops=None, async_every=3):
    """Every collective, dtype, size and reduce op against the references; async works waited late."""
    init(rank, world, port)
    dtypes = [getattr(torch, d) for d in dtypes] if dtypes else DTYPES
    pending = []
    step = 0

    def run(fn, *args, **kw):
        nonlocal step
        step += 1
        if step % async_every == 0:
            w = fn(*args, async_op=True, **kw)
            pending.append(w)
            assert w.wait() and w.is_completed()
            fut = w.get_future()
            fut.wait()
        else:
            assert fn(*args, **kw) is None

    for dtype in dtypes:
        for n in sizes:
            key = (str(dtype), n)
            inputs = [data(("in",) + key + (r,), (n,), dtype) for r in range(world)]
            for op in ops or ops_for(dtype):
                if op == "product" and dtype.is_floating_point and n > 64:
                    continue  # products of many random values overflow float16 (the reference is exact)
                if op == "product" and not (dtype.is_floating_point or dtype.is_complex or dtype is torch.bool):
                    mine = [x % 3 for x in inputs]  # keep integer products small enough to compare
                else:
                    mine = inputs
                want = reference(op, mine, dtype)
                t = mine[rank].clone()
                run(dist.all_reduce, t, REDUCE[op][0])
                close(t, want, dtype, f"all_reduce {op} {dtype} n={n}")
                same_everywhere(t)
                # reduce: only the root gets the result; the others keep their input.
                t = mine[rank].clone()
                run(dist.reduce, t, world - 1, REDUCE[op][0])
                close(t, want if rank == world - 1 else mine[rank], dtype, f"reduce {op} {dtype} n={n}")
            if dtype.is_floating_point and dtype is not torch.float64:
                # PREMUL_SUM: each input scaled by the factor, then summed.
                t = inputs[rank].clone()
                run(dist.all_reduce, t, dist._make_nccl_premul_sum(0.5))
                close(
                    t,
                    reference("sum", [x.double() * 0.5 for x in inputs], torch.float64).to(dtype),
                    dtype,
                    f"premul_sum {dtype} n={n}",
                )
            # broadcast from the last rank, into a poisoned non-root tensor.
            t = inputs[rank].clone() if rank == 1 % world else poison_like(inputs[rank])
            run(dist.broadcast, t, 1 % world)
            assert torch.equal(t, inputs[1 % world]), f"broadcast {dtype} n={n}"
            # all_gather (list) and all_gather_into_tensor
            outs = [poison_like(inputs[0]) for _ in range(world)]
            run(dist.all_gather, outs, inputs[rank])
            for r in range(world):
                assert torch.equal(outs[r], inputs[r]), f"all_gather {dtype} n={n} piece {r}"
            out = poison_like(torch.cat(inputs))
            run(dist.all_gather_into_tensor, out, inputs[rank])
            assert torch.equal(out, torch.cat(inputs)), f"all_gather_into_tensor {dtype} n={n}"
            # reduce_scatter (list) and reduce_scatter_tensor: block r of the sum over ranks
            if dtype is not torch.bool:
                big = [data(("rs",) + key + (r,), (world * n,), dtype) for r in range(world)]
                want = reference("sum", big, dtype)[rank * n : (rank + 1) * n]
                out = poison_like(inputs[0])
                run(dist.reduce_scatter_tensor, out, big[rank])
                close(out, want, dtype, f"reduce_scatter_tensor {dtype} n={n}")
                out = poison_like(inputs[0])
                run(
                    dist.reduce_scatter,
                    out,
                    list(big[rank].chunk(world)) if n else [torch.empty(0, dtype=dtype)] * world,
                )
                close(out, want, dtype, f"reduce_scatter {dtype} n={n}")
            # all_to_all_single, even: piece q of rank p goes to rank q
            src = [data(("a2a",) + key + (r,), (world * n,), dtype) for r in range(world)]
            out = poison_like(src[0])
            run(dist.all_to_all_single, out, src[rank])
            want = torch.cat([src[p][rank * n : (rank + 1) * n] for p in range(world)])
            assert torch.equal(out, want), f"all_to_all_single {dtype} n={n}"
            # uneven splits, 2-D rows: rank p sends (p + q) % 3 * n // 2 + q rows to rank q
            cols = 3
            rows = [[((p + q) % 3) * (n // 2) + q for q in range(world)] for p in range(world)]
            mats = [data(("a2av",) + key + (p,), (sum(rows[p]), cols), dtype) for p in range(world)]
            recv_rows = [rows[p][rank] for p in range(world)]
            out = poison_like(torch.empty((sum(recv_rows), cols), dtype=dtype))
            run(dist.all_to_all_single, out, mats[rank], recv_rows, rows[rank])
            want = torch.cat([mats[p][sum(rows[p][:rank]) : sum(rows[p][: rank + 1])] for p in range(world)])
            assert torch.equal(out, want), f"uneven all_to_all_single {dtype} n={n}"
            # all_to_all with lists of different sizes
            outs = [poison_like(torch.empty(rows[p][rank] * cols, dtype=dtype)) for p in range(world)]
            run(dist.all_to_all, outs, [x.reshape(-1) for x in mats[rank].split(rows[rank])])
            for p in range(world):
                assert torch.equal(outs[p], mats[p][sum(rows[p][:rank]) : sum(rows[p][: rank + 1])].reshape(-1)), (
                    f"all_to_all {dtype} n={n} from {p}"
                )
            # gather to rank 0, scatter from the last rank
            outs = [poison_like(inputs[0]) for _ in range(world)] if rank == 0 else None
            run(dist.gather, inputs[rank], outs, 0)
            if rank == 0:
                for r in range(world):
                    assert torch.equal(outs[r], inputs[r]), f"gather {dtype} n={n} piece {r}"
            out = poison_like(inputs[0])
            root = world - 1
            run(
                dist.scatter,
                out,
                [data(("sc",) + key + (q,), (n,), dtype) for q in range(world)] if rank == root else None,
                root,
            )
            assert torch.equal(out, data(("sc",) + key + (rank,), (n,), dtype)), f"scatter {dtype} n={n}"
            run(dist.barrier)
    dist.destroy_process_group()
    print("OK", flush=True)


def scenario_shapes_and_coalescing(rank, world, port):
    """Non-contiguous, 0-d and empty tensors; all_reduce_coalesced and the coalescing manager; a
    symmetric tensor used in place; the symmetric-memory API used beside the backend."""
    init(rank, world, port)
    import hyper_parallel.core.symmetric_memory as symm

    w = world
    # a transposed (non-contiguous) matrix
    m = (torch.arange(35, dtype=torch.float32).reshape(5, 7) + rank).t()
    assert not m.is_contiguous()
    dist.all_reduce(m)
    want = (torch.arange(35, dtype=torch.float32).reshape(5, 7) * w + sum(range(w))).t()
    assert torch.equal(m, want)
    # sparse COO tensors (summed, as gloo): random entries, overlapping across ranks, duplicates within
    # a rank, a rank with none; a dense dimension on the values
    dense = []
    for r in range(w):
        x = torch.zeros(11, 5, 3, dtype=torch.float64)
        if r != 1:
            g = torch.Generator().manual_seed(100 + r)
            rows, cols = torch.randint(0, 11, (9,), generator=g), torch.randint(0, 5, (9,), generator=g)
            x.index_put_((rows, cols), torch.randn(9, 3, generator=g, dtype=torch.float64), accumulate=True)
        dense.append(x)
    mine = dense[rank].to_sparse(2)
    k = min(2, mine.indices().shape[1])  # repeat the first entries with zero values: duplicates to coalesce
    idx, val = mine.indices(), mine.values()
    mine = torch.sparse_coo_tensor(
        torch.cat([idx, idx[:, :k]], 1), torch.cat([val, torch.zeros(k, 3, dtype=torch.float64)]), mine.shape
    )
    dist.all_reduce(mine)
    assert mine.layout == torch.sparse_coo
    assert torch.allclose(mine.to_dense(), sum(dense), rtol=0, atol=1e-12), "sparse all_reduce"
    try:
        dist.all_reduce(dense[rank].to_sparse(), op=dist.ReduceOp.MAX)
    except ValueError as e:
        assert "sparse tensors are summed only" in str(e), e
    else:
        raise AssertionError("a sparse MAX was accepted")
    # a strided output of all_gather_into_tensor and broadcast into a strided view
    buf = torch.full((2 * w, 4), -1.0)
    view = buf[:, 1:3]
    dist.all_gather_into_tensor(view, torch.full((2, 2), float(rank)))
    assert torch.equal(buf[:, 0], torch.full((2 * w,), -1.0)) and torch.equal(buf[:, 3], torch.full((2 * w,), -1.0))
    for r in range(w):
        assert torch.equal(view[2 * r : 2 * r + 2], torch.full((2, 2), float(r)))
    # 0-d and empty
    s = torch.tensor(float(rank + 1))
    dist.all_reduce(s, dist.ReduceOp.PRODUCT)
    assert s.item() == float(torch.arange(1, w + 1).prod())
    e = torch.empty(0, 3)
    dist.all_reduce(e)
    dist.broadcast(e, 0)
    # coalesced
    ts = [torch.full((k + 1,), float(rank + k)) for k in range(4)] + [torch.full((3,), rank, dtype=torch.int64)]
    dist.all_reduce_coalesced(ts[:4])
    for k in range(4):
        assert torch.equal(ts[k], torch.full((k + 1,), float(sum(r + k for r in range(w)))))
    with dist._coalescing_manager(async_ops=True) as cm:
        a = torch.full((5,), float(rank))
        b = torch.full((2,), float(2 * rank))
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    assert torch.equal(a, torch.full((5,), float(sum(range(w))))) and torch.equal(
        b, torch.full((2,), 2.0 * sum(range(w)))
    )
    outs = [torch.full((w * 3,), -1.0) for _ in range(2)]
    with dist._coalescing_manager():
        for k in range(2):
            dist.all_gather_into_tensor(outs[k], torch.full((3,), float(10 * k + rank)))
    for k in range(2):
        assert torch.equal(outs[k], torch.cat([torch.full((3,), float(10 * k + r)) for r in range(w)]))
    # a tensor of the symmetric heap: reduced in place; the symmetric API beside the backend
    x = symm.empty(1031, dtype=torch.float32)
    x.copy_(torch.arange(1031, dtype=torch.float32) * (rank + 1))
    dist.all_reduce(x)
    assert torch.equal(x, torch.arange(1031, dtype=torch.float32) * sum(range(1, w + 1)))
    dist.broadcast(x, w - 1)
    symm.shmem_allreduce(x)
    assert torch.equal(x, torch.arange(1031, dtype=torch.float32) * sum(range(1, w + 1)) * w)
    # a heap tensor on some ranks, an ordinary one on others: every rank raises
    y = symm.empty(64, dtype=torch.float32)
    z = y if rank % 2 == 0 else torch.zeros(64)
    try:
        dist.all_reduce(z)
    except Exception as err:  # noqa: BLE001
        assert "disagree" in str(err), err
    else:
        raise AssertionError("a heap tensor against a staged one did not raise")
    dist.barrier()
    dist.destroy_process_group()
    print("OK", flush=True)


def scenario_groups(rank, world, port):
    """Subgroups (new_group, new_subgroups, overlapping groups used in turn, a group of one):
    members get their group's results, ranks outside never take part."""
    init(rank, world, port)
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    odds = dist.new_group([r for r in range(world) if r % 2 == 1])
    low = dist.new_group([0, 1])
    single = None
    mine = evens if rank % 2 == 0 else odds
    members = [r for r in range(world) if r % 2 == rank % 2]
    sub, _ = dist.new_subgroups(2)
    for call in range(20):
        t = torch.full((257,), float(rank + call))
        dist.all_reduce(t, group=mine)
        assert torch.equal(t, torch.full((257,), float(sum(members) + call * len(members))))
        if rank in (0, 1):
            u = torch.full((3,), float(rank * 10 + call))
            dist.broadcast(u, 1, group=low)  # src is a global rank
            assert torch.equal(u, torch.full((3,), float(10 + call)))
        v = torch.full((5,), float(rank))
        dist.all_reduce(v, group=sub)
        base = rank // 2 * 2
        assert torch.equal(v, torch.full((5,), float(base + base + 1)))
        outs = [torch.empty(2) for _ in members]
        dist.all_gather(outs, torch.full((2,), float(rank)), group=mine)
        assert [o[0].item() for o in outs] == [float(r) for r in members]
    for r in range(world):  # groups of one, made by every rank in the same order
        g = dist.new_group([r])
        if r == rank:
            single = g
    t = torch.full((4,), 3.0)
    dist.all_reduce(t, group=single)
    assert torch.equal(t, torch.full((4,), 3.0))
    dist.barrier()
    dist.destroy_process_group()
    print("OK", flush=True)


def scenario_p2p(rank, world, port):
    """send/recv with tags out of order, recv from any source, large messages both ways at once,
    batch_isend_irecv rings, empty and non-contiguous messages."""
    init(rank, world, port)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    # tags out of order: the receiver asks for tag 2 first
    if rank == 0:
        dist.send(torch.full((3,), 1.0), 1, tag=1)
        dist.send(torch.full((4,), 2.0), 1, tag=2)
    elif rank == 1:
        b, a = torch.empty(4), torch.empty(3)
        dist.recv(b, 0, tag=2)
        dist.recv(a, 0, tag=1)
        assert torch.equal(a, torch.full((3,), 1.0)) and torch.equal(b, torch.full((4,), 2.0))
    dist.barrier()
    # any source: the last rank receives one message from every other rank
    if rank == world - 1:
        seen = set()
        for _ in range(world - 1):
            t = torch.empty(2, dtype=torch.int64)
            src = dist.recv(t, tag=7)
            assert t[0].item() == src and t[1].item() == 100 + src
            seen.add(src)
        assert seen == set(range(world - 1))
    else:
        dist.send(torch.tensor([rank, 100 + rank]), world - 1, tag=7)
    # large messages (several inbox chunks) both ways around the ring at once, non-blocking
    n = 300_001  # odd, > 1 MiB of float32
    out = torch.arange(n, dtype=torch.float32) + rank * 1e6
    into = torch.full((n,), -1.0)
    reqs = [dist.isend(out, nxt, tag=3), dist.irecv(into, prv, tag=3)]
    for r in reqs:
        r.wait()
    assert torch.equal(into, torch.arange(n, dtype=torch.float32) + prv * 1e6)
    # blocking sends both ways before any receive: progress must drain the inboxes
    if world >= 2 and rank < 2:
        peer = 1 - rank
        big = torch.full((200_000,), float(rank))
        dist.send(big, peer, tag=5) if rank == 0 else None
        got = torch.empty(200_000)
        if rank == 1:
            w = dist.isend(big, peer, tag=5)
            dist.recv(got, peer, tag=5)
            w.wait()
        else:
            dist.recv(got, peer, tag=5)
        assert torch.equal(got, torch.full((200_000,), float(peer)))
    # batch_isend_irecv ring, empty and strided tensors
    strided = (torch.arange(12, dtype=torch.float64).reshape(3, 4) + rank).t()
    recv_strided = torch.full((3, 4), -1.0, dtype=torch.float64).t()  # (4, 3), not contiguous
    assert not recv_strided.is_contiguous()
    empty_in = torch.empty(0)
    ops = [
        dist.P2POp(dist.isend, strided, nxt),
        dist.P2POp(dist.irecv, recv_strided, prv),
        dist.P2POp(dist.isend, torch.empty(0), nxt, tag=9),
        dist.P2POp(dist.irecv, empty_in, prv, tag=9),
    ]
    target = ops[1].tensor
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(target, (torch.arange(12, dtype=torch.float64).reshape(3, 4) + prv).t())
    dist.barrier()
    dist.destroy_process_group()
    print("OK", flush=True)


def _model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
    )


def _train(model, rank, steps, opt_cls=torch.optim.SGD):
    opt = opt_cls(model.parameters(), lr=0.05)
    for step in range(steps):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(8, 64, generator=g)
        y = torch.randint(0, 10, (8,), generator=g)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def scenario_ddp(rank, world, port, backend, hook, out):
    """DDP trained a few steps; the parameters are written to `out` for the test to compare."""
    init(rank, world, port, backend=backend)
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(_model(0), bucket_cap_mb=0.1)
    if hook == "fp16":  # (bf16_compress_hook insists on NCCL)
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif hook == "allreduce":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        model.register_comm_hook(None, default_hooks.allreduce_hook)
    _train(model, rank, 5)
    if rank == 0:
        torch.save([p.detach() for p in model.parameters()], out)
    dist.destroy_process_group()


def _full(p):
    return (p.full_tensor() if hasattr(p, "full_tensor") else p).detach()


def scenario_fsdp_tp(rank, world, port, backend, out):
    """FSDP2 (fully_shard) on an MLP, then tensor parallelism (colwise, rowwise) on another, and
    functional collectives compiled with fullgraph=True against eager; results written to `out`."""
    init(rank, world, port, backend=backend)
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (world,))
    model = _model(1)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    _train(model, rank, 4, torch.optim.Adam)
    fsdp = [_full(p) for p in model.parameters()]

    tp = _model(2)
    parallelize_module(tp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    _train(tp, 0, 3)  # every rank sees the same batches under TP
    tp_params = [_full(p) for p in tp.parameters()]

    def f(x):
        y = funcol.all_reduce(x, "sum", mesh)
        z = funcol.all_gather_tensor(y * 2, 0, mesh)
        return funcol.reduce_scatter_tensor(z, "sum", 0, mesh) + 1

    x = torch.arange(6, dtype=torch.float32) + rank
    eager = f(x)
    compiled = torch.compile(f, fullgraph=True)(x)
    assert torch.equal(eager, compiled), (eager, compiled)
    if rank == 0:
        torch.save({"fsdp": fsdp, "tp": tp_params, "funcol": eager}, out)
    dist.destroy_process_group()


def scenario_mismatch(rank, world, port, new_port):
    """Ranks that pass different sizes, dtypes or ops raise on every rank, and the group goes on."""
    init(rank, world, port)
    failures = 0
    for bad in ("size", "dtype", "op"):
        t = torch.ones(
            5 + (rank if bad == "size" else 0), dtype=torch.float64 if bad == "dtype" and rank == 1 else torch.float32
        )
        try:
            dist.all_reduce(t, dist.ReduceOp.MAX if bad == "op" and rank == 0 else dist.ReduceOp.SUM)
        except Exception as e:  # noqa: BLE001
            assert "disagree" in str(e), e
            failures += 1
    assert failures == 3, failures
    t = torch.ones(3)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((3,), float(world)))
    for bad, exc in (
        (lambda: dist.broadcast(torch.ones(2), world + 3), ValueError),
        (lambda: dist.all_reduce(torch.ones(2, 2, dtype=torch.float64).to_sparse_csr()), TypeError),
        (lambda: dist.all_reduce(torch.ones(2).to_sparse(), dist.ReduceOp.MAX), ValueError),
    ):
        try:
            bad()
        except exc:
            pass
        else:
            raise AssertionError("a bad argument did not raise")
    dist.barrier()
    dist.destroy_process_group()
    # a new job after destroy
    init(rank, world, new_port)
    t = torch.full((4,), float(rank))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(sum(range(world)))))
    dist.destroy_process_group()
    print("OK", flush=True)


def scenario_chunked_mismatch(rank, world, port, only=None):
    """Calls larger than the staging, whose ranks' totals differ though their first chunks are equal (or one
    rank's tensor is exactly one chunk and fits the staging, beside ranks that chunk): CollectiveMismatchError
    on every rank before anything is written (outputs keep their poison, in-place tensors their values), and
    the group goes on. `only`: the cases to try, as "op/how" names (all by default)."""
    init(rank, world, port)
    from hyper_parallel import _hpshmem as _C

    w = world
    stage = dist.group.WORLD._stage_bytes  # bytes one call stages (the group is the backend itself)
    item = 4  # float32
    one_chunk = {"all_reduce": stage // item, "broadcast": stage // item}  # elements of one chunk, per rank
    for op in ("reduce_scatter_tensor", "all_gather_into_tensor", "all_to_all_single", "gather", "scatter"):
        one_chunk[op] = stage // (item * w)
    poison = float(POISON)

    def run(op, n, kept):
        """`op` on this rank's n elements (per rank, or per pair); each tensor the call may write goes into
        `kept` first, with a copy of what it holds."""

        def keep(*ts):
            kept.extend((t, t.clone()) for t in ts)
            return ts[0] if len(ts) == 1 else ts

        if op == "all_reduce":
            dist.all_reduce(keep(torch.arange(n, dtype=torch.float32) + rank))
        elif op == "broadcast":
            dist.broadcast(keep(torch.arange(n, dtype=torch.float32) if rank == 0 else torch.full((n,), poison)), 0)
        elif op == "reduce_scatter_tensor":
            dist.reduce_scatter_tensor(*keep(torch.full((n,), poison), torch.ones(w * n)))
        elif op == "all_gather_into_tensor":
            dist.all_gather_into_tensor(keep(torch.full((w * n,), poison)), torch.ones(n))
        elif op == "all_to_all_single":
            dist.all_to_all_single(keep(torch.full((w * n,), poison)), torch.ones(w * n))
        elif op == "gather":
            outs = [keep(torch.full((n,), poison)) for _ in range(w)] if rank == 0 else None
            dist.gather(torch.ones(n), outs, 0)
        elif op == "scatter":
            dist.scatter(keep(torch.full((n,), poison)), [torch.ones(n) for _ in range(w)] if rank == 0 else None, 0)
        else:
            raise AssertionError(op)

    def expect_mismatch(what, fn):
        try:
            fn()
        except _C.CollectiveMismatchError as e:
            return str(e)
        raise AssertionError(f"{what}: no CollectiveMismatchError on rank {rank}")

    for op, chunk in one_chunk.items():
        # every rank chunks, totals differ (rank 1's is larger), first chunks equal; then rank 0 exactly one
        # chunk (a single call that fits the staging), the others 40000 elements (chunked)
        for how, n in (
            ("different totals", 40000 + 10000 * (rank == 1)),
            ("one rank fits", chunk if rank == 0 else 40000),
        ):
            assert n > chunk or how == "one rank fits"
            if only is not None and f"{op}/{how}" not in only:
                continue
            kept = []
            msg = expect_mismatch(f"{op} ({how})", lambda: run(op, n, kept))
            assert kept or (op == "gather" and rank != 0), op
            for got, want in kept:
                assert torch.equal(got, want), f"{op} ({how}): rank {rank} had a tensor written ({got[:4]}...)"
            if rank != 0 or how == "different totals":  # ranks that chunk say what they saw
                assert "disagree" in msg, msg
    if only is None or "all_to_all_single/uneven" in only:
        # uneven splits whose pair (1 -> 0) disagrees only in its last round; rows of one element
        big = 30000
        out_rows = [big + (rank == 0 and p == 1) for p in range(w)]
        out = torch.full((sum(out_rows),), poison)
        msg = expect_mismatch(
            "uneven all_to_all_single", lambda: dist.all_to_all_single(out, torch.ones(w * big), out_rows, [big] * w)
        )
        assert torch.equal(out, torch.full_like(out, poison)), f"uneven all_to_all_single: rank {rank} was written"
        assert "disagree" in msg and "expects" in msg, msg
    # the group goes on: correct chunked and single calls
    t = torch.arange(40000, dtype=torch.float32) + rank
    dist.all_reduce(t)
    assert torch.equal(t, torch.arange(40000, dtype=torch.float32) * w + sum(range(w)))
    out = torch.full((w * 40000,), poison)
    dist.all_gather_into_tensor(out, torch.full((40000,), float(rank)))
    assert torch.equal(out, torch.arange(w, dtype=torch.float32).repeat_interleave(40000))
    out = torch.full((w * 40000,), poison)
    dist.all_to_all_single(out, torch.full((w * 40000,), float(rank)))
    assert torch.equal(out, torch.arange(w, dtype=torch.float32).repeat_interleave(40000))
    t = torch.ones(5)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((5,), float(w)))
    dist.barrier()
    dist.destroy_process_group()
    print("OK", flush=True)


def scenario_timeouts(rank, world, port):
    """A group made with a timeout of its own bounds its waits by it (other groups keep the job's);
    monitored_barrier names the rank that did not come, on rank 0, and fails the others."""
    import datetime

    from hyper_parallel import _hpshmem as _C

    init(rank, world, port)
    w = dist.get_world_size()
    # (A barrier that timed out leaves its group unusable: the timed group is not the world.)
    quick = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=1))
    if rank < 2:
        t = torch.full((7,), float(rank + 1))
        dist.all_reduce(t, group=quick)
        assert torch.equal(t, torch.full((7,), 3.0)), t
    if rank == 0:  # alone in the group's barrier: its own 1 s runs out, not the job's
        t0 = time.monotonic()
        try:
            dist.barrier(group=quick)
        except _C.ShmemTimeoutError as e:
            took = time.monotonic() - t0
            assert 0.9 <= took < 6, took
            assert "timed out after 1 s" in str(e) and " timeout " in str(e), e
        else:
            raise AssertionError("a lone barrier in a group with a 1 s timeout did not time out")
    else:
        time.sleep(2.5)  # the world's waits outlast the 1 s of the other group
    t = torch.full((5,), float(rank))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((5,), float(sum(range(w))))), t

    pg = dist.distributed_c10d._get_default_group()
    pg.monitored_barrier(datetime.timedelta(seconds=5))
    pg.monitored_barrier(datetime.timedelta(seconds=5), wait_all_ranks=True)
    absent = w - 1
    if rank != absent:
        try:
            pg.monitored_barrier(datetime.timedelta(seconds=1))
        except RuntimeError as e:
            want = (
                f"Rank {absent} failed to pass monitoredBarrier"
                if rank == 0
                else f"Rank {rank} successfully reached monitoredBarrier"
            )
            assert want in str(e), e
        else:
            raise AssertionError(f"rank {absent} stayed away, yet the monitored barrier passed")
    dist.barrier()
    if rank == 0:  # every other rank away, each given the whole timeout
        try:
            pg.monitored_barrier(datetime.timedelta(seconds=0.5), wait_all_ranks=True)
        except RuntimeError as e:
            assert f"Ranks {', '.join(map(str, range(1, w)))} failed to pass monitoredBarrier" in str(e), e
        else:
            raise AssertionError("nobody came, yet the monitored barrier passed")
    dist.barrier()
    # Late reports were withdrawn with their barrier: the next one matches its own messages.
    pg.monitored_barrier(datetime.timedelta(seconds=5))
    dist.destroy_process_group()
    print("OK", flush=True)


def scenario_peer_dies(rank, world, port):
    """The last rank exits hard mid-job; the others' next collective and a pending receive raise
    naming it, within seconds."""
    init(rank, world, port)
    t = torch.ones(8)
    dist.all_reduce(t)
    if rank == world - 1:
        time.sleep(0.2)
        os._exit(9)
    t0 = time.monotonic()
    try:
        for _ in range(100000):
            dist.all_reduce(t)
    except Exception as e:  # noqa: BLE001
        assert str(world - 1) in str(e), e
        print(f"RAISED {time.monotonic() - t0:.2f} {type(e).__name__}", flush=True)
    else:
        raise AssertionError("no error after a peer died")
    os._exit(0)
