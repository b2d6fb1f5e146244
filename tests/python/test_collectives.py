"""Collectives and fused ops against NumPy references, in real multi-process jobs, once per
framework (the scenarios are written once over frameworks.py)."""

import os
import time

import numpy as np
import pytest
from frameworks import cat_bits, current, equal, poison
from launcher import assert_job_ok

HERE = os.path.abspath(__file__)
DTYPES = ["float32", "float16", "bfloat16", "int32"]
_TOL = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 6e-2}


def _data(name, shape, seed):
    return current().random(name, shape, seed, small=True)


def _close(got, want: np.ndarray, name, what):
    """got (a tensor) equals want (float64 NumPy) exactly for int32, within a tolerance otherwise."""
    g = current().values(got)
    assert g.shape == want.shape, f"{what}: shape {g.shape} != {want.shape}"
    if name == "int32":
        assert np.array_equal(g, want.astype(np.int64)), what
        return
    err = float((np.abs(g - want) / (np.abs(want) + 1)).max()) if want.size else 0.0
    assert err <= _TOL[name], f"{what}: max relative error {err} > {_TOL[name]}"


# ----------------------------------------------------------------------------- scenarios
def scenario_allgather(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    for name in DTYPES:
        for n in (0, 1, 13, 4099):
            out = symm.empty(world * n, dtype=F.dtype(name))
            results = {}
            want = cat_bits([_data(name, (n,), 1000 * r + n) for r in range(world)])
            for mode in ("push", "pull"):
                F.fill(out, poison(name))
                x = _data(name, (n,), 1000 * rank + n)
                ret = symm.shmem_allgather(out, x, mode=mode)
                assert ret is out
                assert equal(out, want), f"allgather {name} n={n} {mode}"
                results[mode] = F.bits(out)
            assert np.array_equal(results["push"], results["pull"])
            # in place: the input is this rank's own slot of the output
            F.fill(out, poison(name))
            F.assign(out[rank * n : (rank + 1) * n], _data(name, (n,), 1000 * rank + n))
            symm.shmem_allgather(out, out[rank * n : (rank + 1) * n], mode="push" if n % 2 else "pull")
            assert equal(out, results["push"]), f"in-place allgather {name} n={n}"
            symm.free(out)
    symm.finalize()


def scenario_allgather_back_to_back(rank, world, calls=200):
    """Each call's output is checked by the rank before it enters the next call, which a
    faster peer must not have overwritten yet (no barriers, no re-zeroing)."""
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    n = 37
    out = symm.empty(world * n, dtype=F.dtype("int32"))
    for i in range(calls):
        x = F.full(n, i * 100 + rank, "int32")
        symm.shmem_allgather(out, x, mode="push" if i % 3 else "pull")
        if rank == 0 and i % 7 == 0:
            time.sleep(0.002)  # let the others race ahead
        want = np.repeat(np.arange(world, dtype=np.int32) + i * 100, n)
        assert equal(out, want), f"call {i}: output changed before this rank's next call"
    symm.finalize()


def scenario_alltoall(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()

    def count(src, dst):  # uneven, some empty, prime-ish
        return (src * 7 + dst * 3 + 1) % 11 if (src + dst) % 4 else 0

    for name in DTYPES:
        recv_counts = [count(q, rank) for q in range(world)]
        cap = max(sum(count(q, r) for q in range(world)) for r in range(world)) + 5
        recv = symm.empty(cap, dtype=F.dtype(name))
        # pull needs symmetric send pieces: carve them out of one symmetric tensor per peer
        sym_sends = [symm.empty(max(count(r, p) for r in range(world)), dtype=F.dtype(name)) for p in range(world)]
        results = []
        for mode in ("push", "pull"):
            for it in range(3):
                F.fill(recv, poison(name))
                sends = [_data(name, (count(rank, p),), 31 * rank + 7 * p + it) for p in range(world)]
                if mode == "pull":
                    for p in range(world):
                        F.assign(sym_sends[p][: count(rank, p)], sends[p])
                    sends = [sym_sends[p][: count(rank, p)] for p in range(world)]
                lst = recv_counts if it % 2 else F.tensor(recv_counts, "int64")
                symm.shmem_alltoall(sends, recv, lst, mode=mode)
                want = cat_bits([_data(name, (count(q, rank),), 31 * q + 7 * rank + it) for q in range(world)])
                got = F.bits(recv)
                assert np.array_equal(got[: want.size], want), f"alltoall {name} {mode} iteration {it}"
                assert equal(got[want.size :], F.bits(F.full(cap - want.size, poison(name), name))), (
                    "wrote past the pieces"
                )
                results.append(got[: want.size])
        assert np.array_equal(results[2], results[5]), "push and pull differ"
        symm.barrier()
    symm.finalize()


def scenario_alltoall_mismatch(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    recv = symm.empty(100, dtype=F.dtype("float32"))
    sends = [F.full(3 + (rank == 0 and p == 1), 1.0, "float32") for p in range(world)]  # rank 0 sends 4 to 1
    try:
        symm.shmem_alltoall(sends, recv, [3] * world)
    except symm.CollectiveMismatchError as e:
        assert rank in (0, 1), f"rank {rank} should not fail"
        assert "receive_list expects 3" in str(e) or "disagree" in str(e), str(e)
    else:
        assert rank not in (0, 1), "the mismatch went unnoticed"
    # The job goes on: a correct call works afterwards.
    symm.shmem_alltoall([F.full(2, float(rank), "float32")] * world, recv, [2] * world)
    assert F.values(recv)[: 2 * world].tolist() == [float(q) for q in range(world) for _ in range(2)]
    symm.finalize()


def scenario_fused_ag_mm(rank, world, m=13, k=24, n=10):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    for name in DTYPES:
        for block_size in (None, 1, 4, 5, 13, 100):
            a = _data(name, (m, k), rank + 17)
            b = _data(name, (k, n), 99)
            bs = block_size or symm._default_block_rows(m, world)
            nb = -(-m // bs)
            gather_out = symm.empty((world * m, k), dtype=F.dtype(name))
            signal = symm.empty(world * nb, dtype=F.dtype("int32"))
            F.fill(signal, 0)
            symm.barrier()
            parts = [_data(name, (m, k), r + 17) for r in range(world)]
            full_bits = cat_bits(parts).reshape(world * m, k)
            want = np.concatenate([F.values(p) for p in parts]) @ F.values(b)
            outs = []
            for mode, overlap in (("push", False), ("pull", None), ("push", True)):
                c = F.full((world * m, n), poison(name), name)
                g, cc = symm.fused_all_gather_matmul(
                    a, b, c, gather_out, signal, block_size, mode=mode, overlap=overlap
                )
                assert g is gather_out and cc is c
                assert equal(gather_out, full_bits), f"gather_out {name} bs={block_size} {mode}"
                _close(c, want, name, f"c {name} bs={block_size} {mode}")
                outs.append(F.bits(c))
            assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2]), "push/pull differ"
            symm.free(signal)
            symm.free(gather_out)
    # m = 0: nothing to gather or multiply, but every rank still takes part
    empty_g = symm.empty((0, k), dtype=F.dtype("float32"))
    sig0 = symm.empty(world, dtype=F.dtype("int32"))
    F.fill(sig0, 0)
    symm.barrier()
    for mode in ("push", "pull", "push"):
        g, cc = symm.fused_all_gather_matmul(
            F.full((0, k), 1.0, "float32"), F.full((k, n), 1.0, "float32"), None, empty_g, sig0, mode=mode
        )
        assert F.shape(g) == (0, k) and F.shape(cc) == (0, n)
    symm.finalize()


def scenario_fused_mm_rs(rank, world, mr=5, k=16, n=7):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    m = mr * world
    for name in DTYPES:
        symm_t = symm.empty((m, n), dtype=F.dtype(name))
        signal = symm.empty(world, dtype=F.dtype("int64"))
        F.fill(signal, 0)
        symm.barrier()
        for op in ("sum", "avg"):
            x1 = _data(name, (m, k), 5 * rank + 1)
            x2 = _data(name, (k, n), 7 * rank + 2)
            total = sum(
                F.values(_data(name, (m, k), 5 * r + 1)) @ F.values(_data(name, (k, n), 7 * r + 2))
                for r in range(world)
            )
            if op == "avg":
                total = total / world if name != "int32" else np.trunc(total / world)
            want = total[rank * mr : (rank + 1) * mr]
            for overlap in (False, True):
                got = {}
                for mode in ("push", "pull"):
                    out = symm.fused_matmul_reduce_scatter(x1, x2, symm_t, signal, op, mode=mode, overlap=overlap)
                    assert F.shape(out) == (mr, n) and F.dtype_of(out) == F.dtype(name)
                    _close(out, want, name, f"{name} {op} {mode} overlap={overlap}")
                    got[mode] = F.bits(out)
                assert np.array_equal(got["push"], got["pull"]), f"push/pull differ {name} {op} overlap={overlap}"
    symm.finalize()


def scenario_fused_mm_rs_fixed_order(rank, world, mr=3, k=16, n=5):
    """Partials of wildly different magnitudes, so float32 rounding makes the order of summation
    visible: every rank rebuilds each peer's partial exactly as the op computes it and sums them
    in rank order; the op's result must match bit for bit (a rank-dependent order would not).
    The partials are exact integers: ranks 0 and 1 (mod 4) hold B and -B (2^27 times one matrix),
    the others small ones that float32 absorbs into B, so whichever pair is added first decides the
    bits, and every rotation of the rank order gives other bits on every CPU."""
    import torch

    import hyper_parallel.core.symmetric_memory as symm

    m = mr * world

    def inputs(r):
        g = torch.Generator().manual_seed(1234 + max(r % 4, 1))
        a = torch.randint(1, 3, (m, k), generator=g).float()
        b = torch.randint(1, 3, (k, n), generator=torch.Generator().manual_seed(99)).float()
        return a * (2.0**27, -(2.0**27), 1.0, 1.0)[r % 4], b

    x1, x2 = inputs(rank)
    symm_t = symm.empty((m, n), dtype=torch.float32)
    signal = symm.empty(world, dtype=torch.int64)
    signal.zero_()
    symm.barrier()
    rows = slice(rank * mr, (rank + 1) * mr)
    for overlap in (False, True):
        # As the op computes them: one matmul sliced, or one matmul per target's rows.
        parts = [
            torch.matmul(a, b)[rows] if not overlap else torch.matmul(a[rows], b)
            for a, b in (inputs(r) for r in range(world))
        ]
        want = torch.add(parts[0], parts[1])
        for p in parts[2:]:
            want.add_(p)
        if rank > 0 and not overlap:  # the order a mutation would pick: own partial first
            rotated = torch.add(parts[rank], parts[(rank + 1) % world])
            for j in range(2, world):
                rotated.add_(parts[(rank + j) % world])
            assert not torch.equal(want, rotated), "the data must make the order of summation visible"
        for mode in ("push", "pull"):
            out = symm.fused_matmul_reduce_scatter(x1, x2, symm_t, signal, "sum", mode=mode, overlap=overlap)
            assert torch.equal(out.view(torch.int32), want.view(torch.int32)), (
                f"{mode} overlap={overlap}: not the bits of the partials summed in rank order"
            )
    symm.finalize()


def scenario_fused_back_to_back(rank, world, calls=200):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    m, k, n = 6, 8, 5
    f32 = F.dtype("float32")
    gather_out = symm.empty((world * m, k), dtype=f32)
    sig = symm.empty(world * 3, dtype=F.dtype("int32"))
    symm_t = symm.empty((m * world, n), dtype=f32)
    sig2 = symm.empty(world, dtype=F.dtype("int32"))
    F.fill(sig, 0)
    F.fill(sig2, 0)
    symm.barrier()
    b = _data("float32", (k, n), 3)
    bv = F.values(b)
    for i in range(calls):
        a = _data("float32", (m, k), 1000 * i + rank)
        full = np.concatenate([F.values(_data("float32", (m, k), 1000 * i + r)) for r in range(world)])
        _, c = symm.fused_all_gather_matmul(
            a, b, None, gather_out, sig, 2, mode="push" if i % 2 else "pull", overlap=i % 4 == 1
        )
        _close(c, full @ bv, "float32", f"ag+mm call {i}")
        x1 = _data("float32", (m * world, k), 7 * i + rank)
        out = symm.fused_matmul_reduce_scatter(
            x1, b, symm_t, sig2, "sum", mode="pull" if i % 3 else "push", overlap=i % 5 == 0
        )
        want = sum(F.values(_data("float32", (m * world, k), 7 * i + r)) for r in range(world)) @ bv
        _close(out, want[rank * m : (rank + 1) * m], "float32", f"mm+rs call {i}")
    symm.finalize()


def scenario_bad_arguments(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    V, T = ValueError, TypeError
    f32 = F.dtype("float32")
    out = symm.empty(world * 4, dtype=f32)
    F.fill(out, -3)
    gather_out = symm.empty((world * 4, 3), dtype=f32)
    F.fill(gather_out, -3)
    sig = symm.empty(world * 2, dtype=F.dtype("int32"))
    F.fill(sig, 0)
    symm_t = symm.empty((world * 2, 5), dtype=f32)
    symm.barrier()

    def ones(*shape, name="float32"):
        return F.full(shape, 1.0, name)

    a, b = ones(4, 3), ones(3, 5)
    cases = [
        (
            V,
            f"output_tensor must have world_size x numel(input_tensor) = {world} x 5 = {world * 5} elements, "
            f"has {world * 4}",
            symm.shmem_allgather,
            out,
            ones(5),
        ),
        (T, ") and input_tensor (", symm.shmem_allgather, out, ones(4, name="float64")),
        (V, "not a symmetric tensor", symm.shmem_allgather, ones(world * 4), ones(4)),
        (V, "world_size", symm.shmem_alltoall, [ones(1)], out, [1] * world),
        (V, "adds up to", symm.shmem_alltoall, [ones(1)] * world, out, [99] * world),
        (V, "receive_list[0] must be >= 0", symm.shmem_alltoall, [ones(1)] * world, out, [-1] * world),
        (V, "adds up to more than 9223372036854775807", symm.shmem_alltoall, [ones(1)] * world, out, [2**70] * world),
        (
            V,
            f"receive_list[{world - 1}] must be >= 0",
            symm.shmem_alltoall,
            [ones(1)] * world,
            out,
            [0] * (world - 1) + [-(2**70)],
        ),
        (
            T,
            f"send_tensor_list[{world - 1}] (",
            symm.shmem_alltoall,
            [ones(1)] * (world - 1) + [ones(1, name="float64")],
            out,
            [1] * world,
        ),
        (V, "inner dimensions", symm.fused_all_gather_matmul, a, ones(4, 5), None, gather_out, sig, 2),
        (V, "gather_out must have shape", symm.fused_all_gather_matmul, ones(5, 3), b, None, gather_out, sig, 2),
        (V, "signal must have at least", symm.fused_all_gather_matmul, a, b, None, gather_out, sig, 1),
        (V, "block_size must be >= 1", symm.fused_all_gather_matmul, a, b, None, gather_out, sig, 0),
        (
            T,
            "must have a's dtype",
            symm.fused_all_gather_matmul,
            a,
            ones(3, 5, name="float64"),
            None,
            gather_out,
            sig,
            2,
        ),
        (V, "c must have shape", symm.fused_all_gather_matmul, a, b, ones(3, 3), gather_out, sig, 2),
        (
            V,
            "not divisible by world_size",
            symm.fused_matmul_reduce_scatter,
            ones(world * 2 + 1, 3),
            b,
            symm_t,
            sig,
            "sum",
        ),
        (V, "reduce_op must be", symm.fused_matmul_reduce_scatter, ones(world * 2, 3), b, symm_t, sig, "max"),
        (V, "at least m*n", symm.fused_matmul_reduce_scatter, ones(world * 4, 3), b, symm_t, sig, "sum"),
    ]
    from test_primitives import _expect

    for exc, frag, fn, *args in cases:
        _expect(exc, frag, fn, *args)
    _expect(V, "mode must be", symm.shmem_allgather, out, ones(4), mode="sideways")
    _expect(
        V,
        "send_tensor_list[0] is not a symmetric tensor",
        symm.shmem_alltoall,
        [ones(1)] * world,
        out,
        [1] * world,
        mode="pull",
    )
    # a signal that was never zeroed is caught instead of silently passing a wait
    F.fill(sig, 1 << 20)
    symm.barrier()
    _expect(V, "zero the signal tensor once", symm.fused_all_gather_matmul, a, b, None, gather_out, sig, 2)
    symm.barrier()
    assert equal(out, F.full(world * 4, -3.0, "float32"))
    assert equal(gather_out, F.full((world * 4, 3), -3.0, "float32"))
    symm.finalize()


# ----------------------------------------------------------------------------- tests
# `fw` (conftest.py) runs every test once per framework.
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_allgather_push_and_pull(world, fw):
    assert_job_ok(HERE, "scenario_allgather", world, timeout=300, framework=fw)


@pytest.mark.parametrize("world", [2, 4])
def test_allgather_200_back_to_back_calls(world, fw):
    assert_job_ok(HERE, "scenario_allgather_back_to_back", world, timeout=300, framework=fw)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_alltoall_uneven_and_empty_pieces(world, fw):
    assert_job_ok(HERE, "scenario_alltoall", world, timeout=300, framework=fw)


def test_alltoall_size_mismatch_is_reported(fw):
    assert_job_ok(HERE, "scenario_alltoall_mismatch", 3, framework=fw)


@pytest.mark.parametrize("world", [1, 2, 3])
def test_fused_all_gather_matmul(world, fw):
    assert_job_ok(HERE, "scenario_fused_ag_mm", world, timeout=300, framework=fw)


@pytest.mark.parametrize("world", [1, 2, 4])
def test_fused_matmul_reduce_scatter(world, fw):
    assert_job_ok(HERE, "scenario_fused_mm_rs", world, timeout=300, framework=fw)


@pytest.mark.parametrize("world", [3, 4])
def test_fused_matmul_reduce_scatter_sums_in_one_order_everywhere(world):
    assert_job_ok(HERE, "scenario_fused_mm_rs_fixed_order", world, timeout=300)


@pytest.mark.parametrize("world", [2, 3])
def test_fused_ops_200_back_to_back_calls(world, fw):
    assert_job_ok(HERE, "scenario_fused_back_to_back", world, timeout=300, framework=fw)


@pytest.mark.parametrize("world", [2, 3])
def test_bad_arguments_raise_before_any_write(world, fw):
    assert_job_ok(HERE, "scenario_bad_arguments", world, framework=fw)
