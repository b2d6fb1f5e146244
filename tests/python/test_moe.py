"""MoE dispatch and combine against a NumPy oracle, in real multi-process jobs, once per framework.

Every rank draws every rank's tokens and routing from the same seeds, so each can compute what it
must receive and what its combine must return without communicating."""

import os

import numpy as np
import pytest
from frameworks import current, random_array, seed_of
from launcher import assert_job_ok

HERE = os.path.abspath(__file__)
_TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-2, "bfloat16": 2e-2}


def _routing(kind: str, src: int, tokens: int, world: int, experts: int, k: int, seed: int) -> np.ndarray:
    """topk_idx (tokens x k, int64) of rank `src` for routing `kind`."""
    g = np.random.default_rng(seed)
    local = experts // world
    idx = np.full((tokens, k), -1, np.int64)
    for t in range(tokens):
        if kind == "random":  # distinct experts, some dropped
            chosen = g.choice(experts, size=min(k, experts), replace=False)
            idx[t, : len(chosen)] = chosen
            idx[t, g.random(k) < 0.15] = -1
        elif kind == "one_expert":  # every token of every rank to expert 0 (and nothing else)
            idx[t, 0] = 0
        elif kind == "remote":  # every expert on another rank
            others = [e for e in range(experts) if e // local != src] or list(range(experts))
            idx[t] = g.choice(others, size=k, replace=len(others) < k)
        elif kind == "same_rank":  # all k experts on one rank (it receives the token once)
            r = int(g.integers(world))
            idx[t] = r * local + g.choice(local, size=k, replace=local < k)
        elif kind == "duplicates":  # one expert named twice, and dropped tokens
            e = int(g.integers(experts))
            idx[t] = e
            if t % 3 == 0:
                idx[t] = -1
        else:
            raise ValueError(kind)
    return idx


def _inputs(world, cfg, src, call=0):
    name, hidden, k, experts = cfg["dtype"], cfg["hidden"], cfg["topk"], cfg["experts"]
    tokens = cfg["tokens"][src % len(cfg["tokens"])]
    x = random_array(name, (tokens, hidden), seed_of("x", src, call, hidden))
    idx = _routing(cfg["routing"], src, tokens, world, experts, k, seed_of("idx", src, call, cfg["routing"]))
    w = np.random.default_rng(seed_of("w", src, call)).random((tokens, k)).astype(np.float32)
    return x, idx, w


def _expected_dispatch(world, me, cfg, call, layout, alignment):
    """(rows as float64, topk ids, weights, tokens per expert, per row (src, token))."""
    k, local = cfg["topk"], cfg["experts"] // world
    lo, hi = me * local, (me + 1) * local
    entries = []  # (src, t, local experts of the token, row, ids, weights)
    for s in range(world):
        x, idx, w = _inputs(world, cfg, s, call)
        for t in range(x.shape[0]):
            mine = sorted({int(e) - lo for e in idx[t] if lo <= e < hi})
            if not mine:
                continue
            ids = np.where((idx[t] >= lo) & (idx[t] < hi), idx[t] - lo, -1)
            ws = np.where(ids >= 0, w[t], 0).astype(np.float32)
            entries.append((s, t, mine, x[t].astype(np.float64), ids, ws))
    counts = [sum(1 for en in entries if e in en[2]) for e in range(local)]
    padded = [-(-c // alignment) * alignment for c in counts]
    if layout == "rank_major":
        rows = [(en[3], en[4], en[5], (en[0], en[1])) for en in entries]
    else:
        rows = []
        hidden = cfg["hidden"]
        for e in range(local):
            group = [(en[3], en[4], en[5], (en[0], en[1])) for en in entries if e in en[2]]
            group += [(np.zeros(hidden), np.full(k, -1), np.zeros(k, np.float32), None)] * (padded[e] - len(group))
            rows += group
    return rows, padded


def _check_rows(F, got, want, name, what):
    g = F.values(got)
    assert g.shape == want.shape, f"{what}: shape {g.shape} != {want.shape}"
    if name in ("float32", "float64"):
        assert np.array_equal(g, want), f"{what}: rows differ"
    else:  # half precision went through the oracle as float32 values of the same bits
        assert np.array_equal(g.astype(np.float32), want.astype(np.float32)), f"{what}: rows differ"


def scenario_moe_round_trip(rank, world, cfg):
    """Dispatch, then combine with and without weights, `calls` times on one buffer, both layouts."""
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    name, hidden, k, experts = cfg["dtype"], cfg["hidden"], cfg["topk"], cfg["experts"]
    max_tokens = max(cfg["tokens"])
    buf = symm.shmem_moe_buffer(max_tokens, hidden, F.dtype(name), experts, k)
    assert buf.describe()["bytes"] == symm.debug_state()["moe_buffers"][0]["bytes"] > 0
    tol = _TOL[name]
    for call in range(cfg["calls"]):
        layout = cfg["layouts"][call % len(cfg["layouts"])]
        alignment = cfg["alignment"] if layout == "expert_major" else 1
        xs, idx, w = _inputs(world, cfg, rank, call)
        x = F.tensor(xs, name)
        weights = F.tensor(w, "float32")
        # Odd calls asynchronous: a synchronous call copies this rank's own tokens straight from x
        # (and sums its own rows straight from expert_out), an asynchronous one through its space.
        result = symm.shmem_moe_dispatch(
            x,
            F.tensor(idx, "int64" if call % 2 == 0 else "int32"),
            weights,
            buffer=buf,
            expert_alignment=alignment,
            layout=layout,
            async_op=call % 2 == 1,
        )
        recv_x, recv_idx, recv_w, per_expert, handle = result.wait() if call % 2 else result
        rows, padded = _expected_dispatch(world, rank, cfg, call, layout, alignment)
        want_x = np.array([r[0] for r in rows]).reshape(len(rows), hidden)
        if name in ("float16", "bfloat16"):
            want_x = F.values(F.tensor(want_x, name)) if len(rows) else want_x
        what = f"rank {rank} call {call} {layout}"
        _check_rows(F, recv_x, want_x, name, what + " recv_x")
        assert np.array_equal(F.values(recv_idx), np.array([r[1] for r in rows]).reshape(len(rows), k)), what
        assert np.array_equal(
            F.values(recv_w).astype(np.float32), np.array([r[2] for r in rows], np.float32).reshape(len(rows), k)
        ), what
        assert list(F.values(per_expert)) == padded, f"{what}: tokens per expert {F.values(per_expert)} != {padded}"
        assert handle.num_recv_rows == len(rows)

        # Each rank's experts: identity scaled by (rank + 1); the combine returns, per token,
        # the sum over its (rank, expert) rows of (rank + 1) x token [x weights].
        scaled = F.tensor(F.values(recv_x) * (rank + 1), name)
        plain = symm.shmem_moe_combine(scaled, handle, buffer=buf)
        again = symm.shmem_moe_combine(scaled, handle)
        assert F.bits(plain).tobytes() == F.bits(again).tobytes(), f"{what}: combine not bit-identical"
        weighted = symm.shmem_moe_combine(scaled, handle, topk_weights=recv_w)
        for kind, got in (("plain", plain), ("weighted", weighted)):
            through_space = symm.shmem_moe_combine(
                scaled, handle, topk_weights=recv_w if kind == "weighted" else None, async_op=True
            ).wait()
            assert F.bits(got).tobytes() == F.bits(through_space).tobytes(), f"{what} {kind}: async differs"
        local = experts // world
        want_plain = np.zeros((xs.shape[0], hidden))
        want_weighted = np.zeros((xs.shape[0], hidden))
        xr = F.values(x)
        for t in range(xs.shape[0]):
            for d in range(world):
                on_d = [j for j in range(k) if idx[t, j] >= 0 and idx[t, j] // local == d]
                if not on_d:
                    continue
                n_rows = 1 if layout == "rank_major" else len({int(idx[t, j]) for j in on_d})
                want_plain[t] += n_rows * (d + 1) * xr[t]
                want_weighted[t] += sum(float(w[t, j]) for j in on_d) * (d + 1) * xr[t]
        for got, want, kind in ((plain, want_plain, "plain"), (weighted, want_weighted, "weighted")):
            g = F.values(got)
            assert g.shape == want.shape, f"{what} {kind}: shape {g.shape} != {want.shape}"
            err = float((np.abs(g - want) / (np.abs(want) + 1)).max()) if want.size else 0.0
            assert err <= tol * 4 * world, f"{what} {kind}: max relative error {err}"
    symm.barrier()


def scenario_moe_refusals(rank, world):
    """A bad argument on one rank raises there and CollectiveMismatchError on the others; nothing
    is written and the buffer serves the next call."""
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    hidden, k, experts, tokens = 5, 2, 2 * world, 7
    buf = symm.shmem_moe_buffer(tokens, hidden, F.dtype("float32"), experts, k)
    bad = world - 1
    good_x = F.tensor(np.arange(tokens * hidden, dtype=np.float32).reshape(tokens, hidden) + rank, "float32")
    good_idx = F.tensor(np.arange(tokens * k).reshape(tokens, k) % experts, "int64")
    cases = [
        (ValueError, "topk_idx[3, 1] = ", good_x, "out_of_range"),
        (ValueError, "the buffer holds at most 7 per rank", "too_many", good_idx),
        (ValueError, "hidden size 6", "wide", good_idx),
        (TypeError, "the buffer holds", "float64", good_idx),
        (TypeError, "topk_idx must be an int32 or int64", good_x, "float_idx"),
        (ValueError, "layout must be", good_x, good_idx),
    ]
    for exc, message, x, idx in cases:
        layout = "rank_major"
        if rank == bad:
            if isinstance(x, str) and x == "too_many":
                x = F.tensor(np.zeros((tokens + 1, hidden), np.float32), "float32")
                idx = F.tensor(np.zeros((tokens + 1, k)), "int64")
            elif isinstance(x, str) and x == "wide":
                x = F.tensor(np.zeros((tokens, hidden + 1), np.float32), "float32")
            elif isinstance(x, str) and x == "float64":
                x = F.tensor(np.zeros((tokens, hidden)), "float64")
            if isinstance(idx, str) and idx == "out_of_range":
                a = np.arange(tokens * k).reshape(tokens, k) % experts
                a[3, 1] = experts
                idx = F.tensor(a, "int64")
            elif isinstance(idx, str) and idx == "float_idx":
                idx = F.tensor(np.zeros((tokens, k)), "float32")
            if message.startswith("layout"):
                layout = "by_rank"
        else:
            x = good_x
            idx = good_idx
        try:
            symm.shmem_moe_dispatch(x, idx, buffer=buf, layout=layout)
        except Exception as e:  # noqa: BLE001 - the kind is what is checked
            if rank == bad:
                assert isinstance(e, exc) and message in str(e), f"rank {rank}: {type(e).__name__}: {e}"
            else:
                assert isinstance(e, symm.CollectiveMismatchError), f"rank {rank}: {type(e).__name__}: {e}"
                assert f"group rank {bad} refused" in str(e), str(e)
        else:
            raise AssertionError(f"rank {rank}: {message} was not raised")
    # The buffer still works, and a bad combine is refused the same way.
    recv_x, _, _, _, handle = symm.shmem_moe_dispatch(good_x, good_idx, buffer=buf)
    if rank == bad:
        wrong = F.tensor(np.zeros((F.shape(recv_x)[0] + 1, hidden), np.float32), "float32")
    else:
        wrong = recv_x
    try:
        symm.shmem_moe_combine(wrong, handle)
    except Exception as e:  # noqa: BLE001
        if rank == bad:
            assert isinstance(e, ValueError) and "expert_out must have shape" in str(e), str(e)
        else:
            assert isinstance(e, symm.CollectiveMismatchError), f"{type(e).__name__}: {e}"
    else:
        raise AssertionError("the bad combine was not refused")
    out = symm.shmem_moe_combine(recv_x, handle)
    want = F.values(good_x) * np.array([len({int(e) // 2 for e in row}) for row in F.values(good_idx)])[:, None]
    assert np.array_equal(F.values(out), want)
    symm.barrier()


def scenario_moe_async_and_reuse(rank, world, calls):
    """`calls` back-to-back dispatches and combines on one buffer, every other one asynchronous,
    with arrivals reported before wait()."""
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    hidden, k, experts = 3, 2, world
    buf = symm.shmem_moe_buffer(11, hidden, F.dtype("float32"), experts, k)
    for call in range(calls):
        tokens = (call + rank) % 12
        x = F.tensor(random_array("float32", (tokens, hidden), seed_of(rank, call)), "float32")
        idx = F.tensor(np.random.default_rng(seed_of("i", rank, call)).integers(-1, experts, (tokens, k)), "int64")
        if call % 2:
            work = symm.shmem_moe_dispatch(x, idx, buffer=buf, async_op=True)
            arrived = work.arrived()
            assert all(0 <= r < world for r in arrived)
            recv_x, _, _, _, handle = work.wait()
            assert work.is_completed() and len(work.arrived()) == world
            out = symm.shmem_moe_combine(recv_x, handle, async_op=True).wait()
        else:
            recv_x, _, _, _, handle = symm.shmem_moe_dispatch(x, idx, buffer=buf)
            out = symm.shmem_moe_combine(recv_x, handle)
        ranks_of = [len({int(e) for e in row if e >= 0}) for row in F.values(idx)]
        want = F.values(x) * np.array(ranks_of, dtype=np.float64)[:, None]
        assert np.array_equal(F.values(out), want), f"rank {rank} call {call}"
    assert buf.describe()["dispatches"] == calls and buf.describe()["combines"] == calls
    symm.barrier()


def _grad_inputs(world, src, cfg, torch):
    """Rank src's tokens, routing, weights and its experts' matrix and loss weights (float64)."""
    hidden, k, experts = cfg["hidden"], cfg["topk"], cfg["experts"]
    tokens = cfg["tokens"][src % len(cfg["tokens"])]
    g = np.random.default_rng(seed_of("grad", src))
    idx = _routing(cfg["routing"], src, tokens, world, experts, k, seed_of("gidx", src))
    return (
        torch.tensor(g.standard_normal((tokens, hidden))),
        torch.tensor(idx),
        torch.tensor(g.random((tokens, k)).astype(np.float32).astype(np.float64)),
        torch.tensor(g.standard_normal((hidden, hidden)) / hidden),
        torch.tensor(g.standard_normal((tokens, hidden))),
    )


def scenario_moe_grad(rank, world, cfg):
    """Gradients of x, the router's weights and the experts' parameters through dispatch, a
    per-rank expert (recv_x @ W_rank) and a weighted (or plain) combine, against torch autograd
    of the same computation written with index arithmetic on every rank's data in one process."""
    import torch

    import hyper_parallel.core.symmetric_memory as symm

    dtype = getattr(torch, cfg["dtype"])
    hidden, k, experts = cfg["hidden"], cfg["topk"], cfg["experts"]
    local = experts // world
    buf = symm.shmem_moe_buffer(max(cfg["tokens"]), hidden, dtype, experts, k)
    tol = 1e-10 if cfg["dtype"] == "float64" else 2e-4

    # The oracle: every rank's loss, summed, differentiated in one process.
    data = [
        [t.clone().requires_grad_(i in (0, 2, 3)) for i, t in enumerate(_grad_inputs(world, s, cfg, torch))]
        for s in range(world)
    ]
    total = 0
    for s in range(world):
        x, idx, w, _, gl = data[s]
        out = torch.zeros_like(x)
        for d in range(world):
            on_d = (idx >= d * local) & (idx < (d + 1) * local)
            y = x @ data[d][3]
            if cfg["weighted"]:
                factor = (w * on_d).sum(1, keepdim=True)
            elif cfg["layout"] == "rank_major":
                factor = on_d.any(1, keepdim=True).to(x.dtype)
            else:  # one row per distinct local expert
                distinct = [len({int(e) for e in row if d * local <= e < (d + 1) * local}) for row in idx]
                factor = torch.tensor(distinct, dtype=x.dtype)[:, None]
            out = out + factor * y
        total = total + (out * gl).sum()
    total.backward()

    for step in range(cfg["steps"]):
        x0, idx, w0, W0, gl = _grad_inputs(world, rank, cfg, torch)
        x = x0.to(dtype).requires_grad_(True)
        w = w0.to(torch.float32).requires_grad_(True)
        W = W0.to(dtype).requires_grad_(True)
        recv_x, recv_idx, recv_w, counts, handle = symm.shmem_moe_dispatch(
            x, idx, w if cfg["weighted"] else None, buffer=buf, layout=cfg["layout"], expert_alignment=3
        )
        y = recv_x @ W
        out = symm.shmem_moe_combine(y, handle, topk_weights=recv_w if cfg["weighted"] else None)
        (out.to(torch.float64) * gl).sum().backward()
        want = [data[rank][0].grad, data[rank][3].grad] + ([data[rank][2].grad] if cfg["weighted"] else [])
        got = [x.grad, W.grad] + ([w.grad] if cfg["weighted"] else [])
        for name, gv, wv in zip(("x", "W", "topk_weights"), got, want):
            err = float(((gv.to(torch.float64) - wv).abs() / (wv.abs() + 1)).max()) if wv.numel() else 0.0
            limit = max(tol, 1e-6) if name == "topk_weights" else tol  # a float32 tensor
            assert err <= limit, f"rank {rank} step {step}: grad of {name} off by {err}"
    # Not differentiable asynchronously: refused on every rank, nothing hangs.
    x = torch.zeros((1, hidden), dtype=dtype, requires_grad=rank == 0)
    try:
        symm.shmem_moe_dispatch(x, torch.zeros((1, k), dtype=torch.int64), buffer=buf, async_op=True).wait()
    except Exception as e:  # noqa: BLE001
        want_type = ValueError if rank == 0 else symm.CollectiveMismatchError
        assert isinstance(e, want_type), f"{type(e).__name__}: {e}"
    else:
        raise AssertionError("an async dispatch with autograd was not refused")
    symm.barrier()


_BASE = {"topk": 2, "calls": 2, "alignment": 4, "layouts": ["rank_major", "expert_major"]}
CASES = {
    "random-f32": dict(_BASE, dtype="float32", hidden=33, experts=8, tokens=[17, 5, 0, 23], routing="random"),
    "one-expert-bf16": dict(_BASE, dtype="bfloat16", hidden=7, experts=4, tokens=[9, 13], routing="one_expert"),
    "remote-f16": dict(_BASE, dtype="float16", hidden=64, experts=8, tokens=[31], routing="remote", topk=3),
    "same-rank-f64": dict(_BASE, dtype="float64", hidden=1, experts=12, tokens=[6, 0, 11], routing="same_rank"),
    "duplicates-f32": dict(_BASE, dtype="float32", hidden=5, experts=4, tokens=[19, 2], routing="duplicates", topk=4),
}


# Every case on 3 ranks, and each other world size with one or two cases, in `make test`; the rest
# of the matrix in `make test-full`.
_QUICK = {("random-f32", 1), ("duplicates-f32", 2), ("remote-f16", 2), ("one-expert-bf16", 4), ("random-f32", 4)}
_MATRIX = [
    pytest.param(case, world, marks=() if world == 3 or (case, world) in _QUICK else pytest.mark.full)
    for case in CASES
    for world in (1, 2, 3, 4)
]


@pytest.mark.parametrize("case,world", _MATRIX)
def test_dispatch_and_combine_against_the_oracle(case, world):
    cfg = dict(CASES[case])
    if cfg["experts"] % world:
        cfg["experts"] = world * 2
    assert_job_ok(HERE, "scenario_moe_round_trip", world, timeout=300, kwargs={"cfg": cfg})


@pytest.mark.parametrize("fw", ["torch", "mindspore"])
def test_both_frameworks_and_simulated_hosts(fw):
    cfg = dict(CASES["random-f32"], experts=12)
    assert_job_ok(HERE, "scenario_moe_round_trip", 3, timeout=300, framework=fw, kwargs={"cfg": cfg})
    assert_job_ok(HERE, "scenario_moe_round_trip", 4, timeout=300, framework=fw, layout="hosts", kwargs={"cfg": cfg})


@pytest.mark.parametrize("fw", ["torch", "mindspore"])
def test_refusals_raise_on_every_rank(fw):
    assert_job_ok(HERE, "scenario_moe_refusals", 3, timeout=300, framework=fw)


def test_back_to_back_calls_on_one_buffer_sync_and_async():
    assert_job_ok(HERE, "scenario_moe_async_and_reuse", 3, timeout=300, kwargs={"calls": 100})


@pytest.mark.parametrize(
    "world,layout,weighted,dtype",
    [
        (1, "rank_major", True, "float64"),
        (3, "rank_major", True, "float64"),
        (3, "expert_major", True, "float64"),
        (3, "expert_major", False, "float64"),
        (4, "rank_major", False, "float32"),
    ],
)
def test_gradients_against_the_oracle(world, layout, weighted, dtype):
    cfg = dict(
        dtype=dtype,
        hidden=2 if world == 1 else 6,  # 2 < topk: the weights travel in two combines
        topk=3,
        experts=2 * world,
        tokens=[7, 0, 11, 4][:world],
        routing="random",
        layout=layout,
        weighted=weighted,
        steps=2,
    )
    if world == 3:
        cfg["routing"] = "duplicates"
    assert_job_ok(HERE, "scenario_moe_grad", world, timeout=300, kwargs={"cfg": cfg})


@pytest.mark.parametrize(
    "cfg",
    [
        dict(_BASE, dtype="bfloat16", hidden=7168, experts=6, tokens=[300, 129, 0], routing="random", calls=1),
        dict(_BASE, dtype="float32", hidden=3, experts=9, tokens=[4096, 1, 2049], routing="random", topk=8, calls=1),
    ],
    ids=["hidden-7168", "4096-tokens-top8"],
)
def test_large_shapes_on_3_ranks(cfg):
    assert_job_ok(HERE, "scenario_moe_round_trip", 3, timeout=600, kwargs={"cfg": cfg})


def scenario_moe_grad_mindspore(rank, world, layout, weighted):
    """mindspore.grad through dispatch, a linear expert per rank and a (weighted) combine: the
    gradients of x, the weights and the expert against the closed form, from every rank's data."""
    import mindspore as ms
    from mindspore import Parameter, Tensor, ops

    import hyper_parallel.core.symmetric_memory as symm

    hidden, k, experts = 5, 3, 2 * world
    local = experts // world
    tokens = [9, 0, 6, 4]

    def inputs(s):
        g = np.random.default_rng(seed_of("msgrad", s))
        t = tokens[s]
        idx = _routing("duplicates" if s % 2 else "random", s, t, world, experts, k, seed_of("msidx", s))
        return (
            g.standard_normal((t, hidden)).astype(np.float32),
            idx,
            g.random((t, k)).astype(np.float32),
            (g.standard_normal((hidden, hidden)) / hidden).astype(np.float32),
            g.standard_normal((t, hidden)).astype(np.float32),
        )

    data = [inputs(s) for s in range(world)]
    x0, idx0, w0, W0, G0 = data[rank]
    buf = symm.shmem_moe_buffer(max(tokens), hidden, ms.float32, experts, k)
    W = Parameter(Tensor(W0), name="expert")
    idx_t, G = Tensor(idx0), Tensor(G0)

    def loss_fn(x, w):
        recv_x, _, recv_w, _, h = symm.shmem_moe_dispatch(
            x, idx_t, w if weighted else None, buffer=buf, layout=layout, expert_alignment=2
        )
        out = symm.shmem_moe_combine(ops.matmul(recv_x, W), h, topk_weights=recv_w)
        return (out * G).sum()

    (gx, gw), (gW,) = ms.grad(loss_fn, grad_position=(0, 1), weights=[W])(Tensor(x0), Tensor(w0))

    def factor(s, t, d):
        idx, w = data[s][1][t], data[s][2][t]
        on_d = [j for j in range(k) if idx[j] >= 0 and idx[j] // local == d]
        if weighted:
            return float(sum(w[j] for j in on_d))
        if layout == "rank_major":
            return 1.0 if on_d else 0.0
        return float(len({int(idx[j]) for j in on_d}))

    want_x = np.zeros_like(x0, dtype=np.float64)
    for t in range(tokens[rank]):
        for d in range(world):
            want_x[t] += factor(rank, t, d) * (G0[t].astype(np.float64) @ data[d][3].T.astype(np.float64))
    want_W = np.zeros((hidden, hidden))
    for s in range(world):
        for t in range(tokens[s]):
            want_W += factor(s, t, rank) * np.outer(data[s][0][t], data[s][4][t])
    checks = [("x", gx.asnumpy(), want_x), ("expert", gW.asnumpy(), want_W)]
    if weighted:
        want_w = np.zeros((tokens[rank], k))
        for t in range(tokens[rank]):
            for j in range(k):
                e = idx0[t, j]
                if e >= 0:
                    want_w[t, j] = (x0[t].astype(np.float64) @ data[e // local][3]) @ G0[t]
        checks.append(("topk_weights", gw.asnumpy(), want_w))
    for name, got, want in checks:
        err = float((np.abs(got - want) / (np.abs(want) + 1)).max()) if want.size else 0.0
        assert err <= 1e-5, f"rank {rank} {layout} weighted={weighted}: grad of {name} off by {err}"
    symm.barrier()


@pytest.mark.parametrize("layout,weighted", [("rank_major", True), ("expert_major", True), ("expert_major", False)])
def test_mindspore_gradients_against_the_closed_form(layout, weighted):
    assert_job_ok(
        HERE,
        "scenario_moe_grad_mindspore",
        3,
        timeout=300,
        framework="mindspore",
        kwargs={"layout": layout, "weighted": weighted},
    )
