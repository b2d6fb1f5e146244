"""Collectives and fused ops against torch references, in real multi-process jobs."""
import os

import pytest

from launcher import assert_job_ok

HERE = os.path.abspath(__file__)
DTYPES = ["float32", "float16", "bfloat16", "int32"]


def _torch():
    import torch
    return torch


def _data(dtype, shape, seed):
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=torch.int64).to(dtype)


def _poison(dtype):
    return -12345 if not dtype.is_floating_point else -12345.0


def _close(got, want, dtype, what):
    torch = _torch()
    if dtype == torch.int32:
        assert torch.equal(got, want), what
        return
    tol = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 6e-2}[dtype]
    g, w = got.float(), want.float()
    err = ((g - w).abs() / (w.abs() + 1)).max().item() if w.numel() else 0.0
    assert err <= tol, f"{what}: max relative error {err} > {tol}"


# ----------------------------------------------------------------------------- scenarios
def scenario_allgather(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    for name in DTYPES:
        dtype = getattr(torch, name)
        for n in (0, 1, 13, 4099):
            out = symm.empty(world * n, dtype=dtype)
            results = {}
            for mode in ("push", "pull"):
                out.fill_(_poison(dtype))
                x = _data(dtype, (n,), 1000 * rank + n)
                ret = symm.shmem_allgather(out, x, mode=mode)
                assert ret is out
                want = torch.cat([_data(dtype, (n,), 1000 * r + n) for r in range(world)])
                assert torch.equal(out, want), f"allgather {name} n={n} {mode}"
                results[mode] = out.clone()
            assert torch.equal(results["push"], results["pull"])
            # in place: the input is this rank's own slot of the output
            out.fill_(_poison(dtype))
            out[rank * n:(rank + 1) * n] = _data(dtype, (n,), 1000 * rank + n)
            symm.shmem_allgather(out, out[rank * n:(rank + 1) * n], mode="push" if n % 2 else "pull")
            assert torch.equal(out, results["push"]), f"in-place allgather {name} n={n}"
            symm.free(out)
    symm.finalize()


def scenario_allgather_back_to_back(rank, world, calls=200):
    """Each call's output is checked by the rank before it enters the next call, which a
    faster peer must not have overwritten yet (no barriers, no re-zeroing)."""
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    n = 37
    out = symm.empty(world * n, dtype=torch.int32)
    for i in range(calls):
        x = torch.full((n,), i * 100 + rank, dtype=torch.int32)
        symm.shmem_allgather(out, x, mode="push" if i % 3 else "pull")
        if rank == 0 and i % 7 == 0:
            import time
            time.sleep(0.002)  # let the others race ahead
        want = torch.cat([torch.full((n,), i * 100 + r, dtype=torch.int32) for r in range(world)])
        assert torch.equal(out, want), f"call {i}: output changed before this rank's next call"
    symm.finalize()


def scenario_alltoall(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm

    def count(src, dst):  # uneven, some empty, prime-ish
        return (src * 7 + dst * 3 + 1) % 11 if (src + dst) % 4 else 0

    for name in DTYPES:
        dtype = getattr(torch, name)
        recv_counts = [count(q, rank) for q in range(world)]
        cap = max(sum(count(q, r) for q in range(world)) for r in range(world)) + 5
        recv = symm.empty(cap, dtype=dtype)
        # pull needs symmetric send pieces: carve them out of one symmetric tensor per peer
        sym_sends = [symm.empty(max(count(r, p) for r in range(world)), dtype=dtype) for p in range(world)]
        results = []
        for mode in ("push", "pull"):
            for it in range(3):
                recv.fill_(_poison(dtype))
                sends = [_data(dtype, (count(rank, p),), 31 * rank + 7 * p + it) for p in range(world)]
                if mode == "pull":
                    for p in range(world):
                        sym_sends[p][:count(rank, p)] = sends[p]
                    sends = [sym_sends[p][:count(rank, p)] for p in range(world)]
                lst = recv_counts if it % 2 else torch.tensor(recv_counts, dtype=torch.int64)
                symm.shmem_alltoall(sends, recv, lst, mode=mode)
                want = torch.cat([_data(dtype, (count(q, rank),), 31 * q + 7 * rank + it) for q in range(world)])
                got = recv[:want.numel()]
                assert torch.equal(got, want), f"alltoall {name} {mode} iteration {it}"
                rest = recv[want.numel():]
                assert torch.equal(rest, torch.full_like(rest, _poison(dtype))), "wrote past the pieces"
                results.append(got.clone())
        assert torch.equal(results[2], results[5]), "push and pull differ"
        symm.barrier()
    symm.finalize()


def scenario_alltoall_mismatch(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    recv = symm.empty(100, dtype=torch.float32)
    sends = [torch.ones(3 + (rank == 0 and p == 1)) for p in range(world)]  # rank 0 sends 4 to rank 1
    try:
        symm.shmem_alltoall(sends, recv, [3] * world)
    except symm.CollectiveMismatchError as e:
        assert rank in (0, 1), f"rank {rank} should not fail"
        assert "receive_list expects 3" in str(e) or "disagree" in str(e), str(e)
    else:
        assert rank not in (0, 1), "the mismatch went unnoticed"
    # The job goes on: a correct call works afterwards.
    symm.shmem_alltoall([torch.full((2,), float(rank))] * world, recv, [2] * world)
    assert recv[:2 * world].tolist() == [float(q) for q in range(world) for _ in range(2)]
    symm.finalize()


def scenario_fused_ag_mm(rank, world, m=13, k=24, n=10):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    for name in DTYPES:
        dtype = getattr(torch, name)
        for block_size in (None, 1, 4, 5, 13, 100):
            a = _data(dtype, (m, k), rank + 17)
            b = _data(dtype, (k, n), 99)
            bs = block_size or symm._default_block_rows(m, world)
            nb = -(-m // bs)
            gather_out = symm.empty((world * m, k), dtype=dtype)
            signal = symm.empty(world * nb, dtype=torch.int32)
            signal.zero_()
            symm.barrier()
            full = torch.cat([_data(dtype, (m, k), r + 17) for r in range(world)])
            want = (full.float() @ b.float()) if dtype != torch.int32 else full @ b
            outs = []
            for mode, overlap in (("push", False), ("pull", None), ("push", True)):
                c = torch.full((world * m, n), _poison(dtype), dtype=dtype)
                g, cc = symm.fused_all_gather_matmul(a, b, c, gather_out, signal, block_size, mode=mode,
                                                     overlap=overlap)
                assert g is gather_out and cc is c
                assert torch.equal(gather_out, full), f"gather_out {name} bs={block_size} {mode}"
                _close(c, want.to(dtype) if dtype == torch.int32 else want, dtype, f"c {name} bs={block_size} {mode}")
                outs.append(c.clone())
            assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2]), "push/pull differ"
            symm.free(signal)
            symm.free(gather_out)
    # m = 0: nothing to gather or multiply, but every rank still takes part
    empty_g = symm.empty((0, k), dtype=torch.float32)
    sig0 = symm.empty(world, dtype=torch.int32)
    sig0.zero_()
    symm.barrier()
    for mode in ("push", "pull", "push"):
        g, cc = symm.fused_all_gather_matmul(torch.ones(0, k), torch.ones(k, n), None, empty_g, sig0, mode=mode)
        assert tuple(g.shape) == (0, k) and tuple(cc.shape) == (0, n)
    symm.finalize()


def scenario_fused_mm_rs(rank, world, mr=5, k=16, n=7):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    m = mr * world
    for name in DTYPES:
        dtype = getattr(torch, name)
        symm_t = symm.empty((m, n), dtype=dtype)
        signal = symm.empty(world, dtype=torch.int64)
        signal.zero_()
        symm.barrier()
        for op in ("sum", "avg"):
            x1 = _data(dtype, (m, k), 5 * rank + 1)
            x2 = _data(dtype, (k, n), 7 * rank + 2)
            total = sum(_data(dtype, (m, k), 5 * r + 1).double() @ _data(dtype, (k, n), 7 * r + 2).double()
                        for r in range(world))
            if op == "avg":
                total = total / world if dtype != torch.int32 else torch.div(total, world, rounding_mode="trunc")
            want = total[rank * mr:(rank + 1) * mr]
            for overlap in (False, True):
                got = {}
                for mode in ("push", "pull"):
                    out = symm.fused_matmul_reduce_scatter(x1, x2, symm_t, signal, op, mode=mode, overlap=overlap)
                    assert tuple(out.shape) == (mr, n) and out.dtype == dtype
                    _close(out, want.to(dtype) if dtype == torch.int32 else want, dtype,
                           f"{name} {op} {mode} overlap={overlap}")
                    got[mode] = out
                assert torch.equal(got["push"], got["pull"]), f"push/pull differ {name} {op} overlap={overlap}"
    symm.finalize()


def scenario_fused_back_to_back(rank, world, calls=200):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    m, k, n = 6, 8, 5
    gather_out = symm.empty((world * m, k), dtype=torch.float32)
    sig = symm.empty(world * 3, dtype=torch.int32)
    symm_t = symm.empty((m * world, n), dtype=torch.float32)
    sig2 = symm.empty(world, dtype=torch.int32)
    sig.zero_()
    sig2.zero_()
    symm.barrier()
    b = _data(torch.float32, (k, n), 3)
    for i in range(calls):
        a = _data(torch.float32, (m, k), 1000 * i + rank)
        full = torch.cat([_data(torch.float32, (m, k), 1000 * i + r) for r in range(world)])
        _, c = symm.fused_all_gather_matmul(a, b, None, gather_out, sig, 2, mode="push" if i % 2 else "pull",
                                            overlap=i % 4 == 1)
        _close(c, full @ b, torch.float32, f"ag+mm call {i}")
        x1 = _data(torch.float32, (m * world, k), 7 * i + rank)
        out = symm.fused_matmul_reduce_scatter(x1, b, symm_t, sig2, "sum", mode="pull" if i % 3 else "push",
                                               overlap=i % 5 == 0)
        want = sum(_data(torch.float32, (m * world, k), 7 * i + r) for r in range(world)) @ b
        _close(out, want[rank * m:(rank + 1) * m], torch.float32, f"mm+rs call {i}")
    symm.finalize()


def scenario_bad_arguments(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    V, T = ValueError, TypeError
    out = symm.empty(world * 4, dtype=torch.float32)
    out.fill_(-3)
    gather_out = symm.empty((world * 4, 3), dtype=torch.float32)
    gather_out.fill_(-3)
    sig = symm.empty(world * 2, dtype=torch.int32)
    sig.zero_()
    symm_t = symm.empty((world * 2, 5), dtype=torch.float32)
    symm.barrier()
    a, b = torch.ones(4, 3), torch.ones(3, 5)
    cases = [
        (V, "elements, has", symm.shmem_allgather, out, torch.ones(5)),
        (T, "same dtype", symm.shmem_allgather, out, torch.ones(4, dtype=torch.float64)),
        (V, "not a symmetric tensor", symm.shmem_allgather, torch.ones(world * 4), torch.ones(4)),
        (V, "world_size", symm.shmem_alltoall, [torch.ones(1)], out, [1] * world),
        (V, "adds up to", symm.shmem_alltoall, [torch.ones(1)] * world, out, [99] * world),
        (V, "receive_list[0] must be >= 0", symm.shmem_alltoall, [torch.ones(1)] * world, out, [-1] * world),
        (V, "inner dimensions", symm.fused_all_gather_matmul, a, torch.ones(4, 5), None, gather_out, sig, 2),
        (V, "gather_out must have shape", symm.fused_all_gather_matmul, torch.ones(5, 3), b, None, gather_out, sig, 2),
        (V, "signal must have at least", symm.fused_all_gather_matmul, a, b, None, gather_out, sig, 1),
        (V, "block_size must be >= 1", symm.fused_all_gather_matmul, a, b, None, gather_out, sig, 0),
        (T, "must have a's dtype", symm.fused_all_gather_matmul, a, b.double(), None, gather_out, sig, 2),
        (V, "c must have shape", symm.fused_all_gather_matmul, a, b, torch.ones(3, 3), gather_out, sig, 2),
        (V, "not divisible by world_size", symm.fused_matmul_reduce_scatter, torch.ones(world * 2 + 1, 3), b,
         symm_t, sig, "sum"),
        (V, "reduce_op must be", symm.fused_matmul_reduce_scatter, torch.ones(world * 2, 3), b, symm_t, sig, "max"),
        (V, "at least m*n", symm.fused_matmul_reduce_scatter, torch.ones(world * 4, 3), b, symm_t, sig, "sum"),
    ]
    from test_primitives import _expect
    for exc, frag, fn, *args in cases:
        _expect(exc, frag, fn, *args)
    _expect(V, "mode must be", symm.shmem_allgather, out, torch.ones(4), mode="sideways")
    _expect(V, "send_tensor_list[0] is not a symmetric tensor", symm.shmem_alltoall, [torch.ones(1)] * world, out,
            [1] * world, mode="pull")
    # a signal that was never zeroed is caught instead of silently passing a wait
    sig.fill_(1 << 20)
    symm.barrier()
    _expect(V, "zero the signal tensor once", symm.fused_all_gather_matmul, a, b, None, gather_out, sig, 2)
    symm.barrier()
    assert torch.equal(out, torch.full_like(out, -3)) and torch.equal(gather_out, torch.full_like(gather_out, -3))
    symm.finalize()


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_allgather_push_and_pull(world):
    assert_job_ok(HERE, "scenario_allgather", world, timeout=300)


@pytest.mark.parametrize("world", [2, 4])
def test_allgather_200_back_to_back_calls(world):
    assert_job_ok(HERE, "scenario_allgather_back_to_back", world, timeout=300)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_alltoall_uneven_and_empty_pieces(world):
    assert_job_ok(HERE, "scenario_alltoall", world, timeout=300)


def test_alltoall_size_mismatch_is_reported():
    assert_job_ok(HERE, "scenario_alltoall_mismatch", 3)


@pytest.mark.parametrize("world", [1, 2, 3])
def test_fused_all_gather_matmul(world):
    assert_job_ok(HERE, "scenario_fused_ag_mm", world, timeout=300)


@pytest.mark.parametrize("world", [1, 2, 4])
def test_fused_matmul_reduce_scatter(world):
    assert_job_ok(HERE, "scenario_fused_mm_rs", world, timeout=300)


@pytest.mark.parametrize("world", [2, 3])
def test_fused_ops_200_back_to_back_calls(world):
    assert_job_ok(HERE, "scenario_fused_back_to_back", world, timeout=300)


@pytest.mark.parametrize("world", [2, 3])
def test_bad_arguments_raise_before_any_write(world):
    assert_job_ok(HERE, "scenario_bad_arguments", world)
