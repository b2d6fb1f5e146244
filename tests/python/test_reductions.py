"""All-reduce, reduce-scatter and broadcast against bit-exact NumPy references (and, for torch,
against gloo's own all_reduce), in real multi-process jobs, once per framework.

Every rank generates every rank's input from the same seeds, so each can compute the exact
expected result: the ranks' values combined in rank order, float16/bfloat16 in float32 and
rounded once, integers wrapping, integer averages truncated toward zero.
"""

import os

import numpy as np
import pytest
from frameworks import current, poison, seed_of
from launcher import assert_job_ok

HERE = os.path.abspath(__file__)
DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64"]
OPS = ["sum", "avg", "max", "min", "prod"]
SIZES = [0, 1, 7, 4099]


def _as_float32(bits: np.ndarray, name: str) -> np.ndarray:
    if name == "bfloat16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.astype(np.float32)


def _round(acc: np.ndarray, name: str) -> np.ndarray:
    """float32 accumulator -> the dtype's bits, round to nearest even."""
    if name == "bfloat16":
        u = acc.astype(np.float32).view(np.uint32).astype(np.uint64)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    with np.errstate(over="ignore"):
        return acc.astype(np.float16)


def reference(inputs, name: str, op: str, world: int) -> np.ndarray:
    """The expected bits of reducing `inputs` (each rank's bits, in rank order)."""
    half = name in ("float16", "bfloat16")
    vals = [_as_float32(x, name) if half else x for x in inputs]
    with np.errstate(over="ignore", invalid="ignore"):
        acc = vals[0].copy()
        for v in vals[1:]:
            if op in ("sum", "avg"):
                acc = acc + v
            elif op == "prod":
                acc = acc * v
            elif op == "max":
                acc = np.maximum(acc, v)
            else:
                acc = np.minimum(acc, v)
        if op == "avg":
            if acc.dtype.kind in "iu":
                wide = acc.astype(np.int64)
                acc = (np.sign(wide) * (np.abs(wide) // world)).astype(acc.dtype)
            else:
                acc = (acc / acc.dtype.type(world)).astype(acc.dtype)
    return _round(acc, name) if half else acc.astype(inputs[0].dtype)


def _inputs(F, name, n, world, call):
    """Every rank's input for this call: tensors, and their bits."""
    tensors = [F.random(name, n, seed_of("allreduce", name, n, call, p), small=True) for p in range(world)]
    return tensors, [F.bits(t) for t in tensors]


def scenario_allreduce(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    call = 0
    for name in DTYPES:
        buf = symm.empty(max(SIZES), dtype=F.dtype(name))
        for op in OPS:
            for n in SIZES:
                for algorithm in [None, "one_shot", "two_shot"] if name == "float32" else [None]:
                    call += 1
                    tensors, bits = _inputs(F, name, n, world, call)
                    view = buf[:n] if n else buf[:0]
                    F.assign(view, tensors[rank])
                    # No barrier: a faster rank's next call must not disturb this one.
                    out = symm.shmem_allreduce(view, op, algorithm=algorithm)
                    assert out is view
                    want = reference(bits, name, op, world)
                    got = F.bits(view)
                    assert np.array_equal(got, want), f"{name} {op} n={n} {algorithm}: {got[:8]} != {want[:8]}"
    # One large call (16 MiB of float32), both algorithms.
    big = symm.empty(4 << 20, dtype=F.dtype("float32"))
    for algorithm in ("one_shot", "two_shot"):
        call += 1
        tensors, bits = _inputs(F, "float32", 4 << 20, world, call)
        F.assign(big, tensors[rank])
        symm.shmem_allreduce(big, "sum", algorithm=algorithm)
        assert np.array_equal(F.bits(big), reference(bits, "float32", "sum", world)), f"16 MiB {algorithm}"
    symm.barrier()


def scenario_allreduce_deterministic(rank, world, calls=100):
    """The same inputs give the same bits on every call and every rank (compared through a gather)."""
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    n = 1001
    buf = symm.empty(n, dtype=F.dtype("float32"))
    gathered = symm.empty(world * n, dtype=F.dtype("float32"))
    x = F.random("float32", n, seed_of("det", rank))
    first = None
    for _ in range(calls):
        F.assign(buf, x)
        symm.shmem_allreduce(buf, "sum")
        bits = F.bits(buf)
        if first is None:
            first = bits
        assert np.array_equal(bits, first), "a later call differs"
    symm.shmem_allgather(gathered, buf)
    all_bits = F.bits(gathered).reshape(world, n)
    assert all(np.array_equal(all_bits[p], first) for p in range(world)), "ranks differ"
    symm.barrier()


def scenario_reduce_scatter_and_broadcast(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    call = 0
    for name in ("float32", "bfloat16", "int64", "uint8"):
        for n in (0, 1, 7, 4099):
            for op in ("sum", "max", "avg"):
                call += 1
                tensors, bits = _inputs(F, name, world * n, world, call)
                inp = symm.empty(world * n, dtype=F.dtype(name))
                F.assign(inp, tensors[rank])
                out = F.full(n + 3, poison(name), name)
                view = out[1 : n + 1]
                symm.shmem_reduce_scatter(view, inp, op)
                want = reference(bits, name, op, world)[rank * n : (rank + 1) * n]
                got = F.bits(out)
                assert np.array_equal(got[1 : n + 1], want), f"reduce_scatter {name} {op} n={n}"
                pb = F.bits(F.full(1, poison(name), name))[0]
                assert got[0] == pb and got[n + 1] == pb and got[n + 2] == pb, "reduce_scatter wrote outside"
                assert np.array_equal(F.bits(inp), bits[rank]), "reduce_scatter changed its input"
                symm.free(inp)
        for n in (1, 13, 65537):
            root = (call + n) % world
            call += 1
            buf = symm.empty(n, dtype=F.dtype(name))
            data = F.random(name, n, seed_of("bcast", name, n, root))
            F.assign(buf, data if rank == root else F.full(n, poison(name), name))
            symm.shmem_broadcast(buf, root)
            assert np.array_equal(F.bits(buf), F.bits(data)), f"broadcast {name} n={n} root={root}"
            symm.free(buf)
    symm.barrier()


def scenario_reduction_errors(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    buf = symm.empty(16, dtype=F.dtype("float32"))
    flags = symm.empty(16, dtype=F.dtype("bool"))
    F.fill(buf, float(rank + 1))
    symm.barrier()

    def expect(exc, fragment, fn, *args, **kw):
        try:
            fn(*args, **kw)
        except exc as e:
            assert fragment in str(e), f"{str(e)!r} does not name {fragment!r}"
            return
        raise AssertionError(f"{fn.__name__} did not raise {exc.__name__} ({fragment})")

    expect(symm.ShmemValueError, "op must be one of", symm.shmem_allreduce, buf, "mean")
    expect(symm.ShmemValueError, "algorithm", symm.shmem_allreduce, buf, "sum", algorithm="ring")
    expect(symm.ShmemTypeError, "cannot be reduced", symm.shmem_allreduce, flags)
    expect(symm.ShmemValueError, "not a symmetric tensor", symm.shmem_allreduce, F.full(16, 1.0, "float32"))
    expect(symm.ShmemValueError, "root", symm.shmem_broadcast, buf, world)
    expect(
        symm.ShmemValueError, "world_size x numel(output)", symm.shmem_reduce_scatter, F.full(3, 0.0, "float32"), buf
    )
    expect(symm.ShmemTypeError, "same dtype", symm.shmem_reduce_scatter, F.full(1, 0, "int32"), buf)
    if world > 1:
        # Ranks disagreeing (here on the op) fail alike on every rank, before anything is written.
        expect(
            symm.CollectiveMismatchError,
            "ranks disagree",
            symm.shmem_allreduce,
            buf,
            "max" if rank == world - 1 else "sum",
        )
        expect(symm.CollectiveMismatchError, "ranks disagree", symm.shmem_broadcast, buf, rank % 2)
    symm.barrier()
    assert np.array_equal(F.values(buf), np.full(16, rank + 1.0)), "a rejected call wrote"
    symm.shmem_allreduce(buf, "sum")  # and the next call works
    assert np.array_equal(F.values(buf), np.full(16, world * (world + 1) / 2)), "the call after the errors"
    symm.barrier()


def scenario_allreduce_matches_gloo(rank, world):
    """torch only: the same sums as torch.distributed's own all_reduce (gloo)."""
    import torch
    import torch.distributed as dist

    import hyper_parallel.core.symmetric_memory as symm

    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        for n in (1, 4099, 300007):
            g = torch.Generator().manual_seed(1000 * rank + n)
            x = (torch.randn(n, generator=g) * 100).to(dtype)
            ours = symm.empty(n, dtype=dtype)
            ours.copy_(x)
            theirs = x.clone()
            symm.shmem_allreduce(ours, "sum")
            dist.all_reduce(theirs)
            if dtype == torch.int64:
                assert torch.equal(ours, theirs), f"int64 n={n}"
            else:
                tol = 1e-5 if dtype == torch.float32 else 2e-2
                torch.testing.assert_close(ours.float(), theirs.float(), rtol=tol, atol=tol * 100)
            symm.free(ours)
    symm.barrier()


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_allreduce_every_dtype_op_and_size(world, fw):
    assert_job_ok(HERE, "scenario_allreduce", world, framework=fw, timeout=600)


@pytest.mark.parametrize("world", [2, 3])
def test_allreduce_is_deterministic_over_100_calls(world, fw):
    assert_job_ok(HERE, "scenario_allreduce_deterministic", world, framework=fw)


@pytest.mark.parametrize("world", [1, 3, 4])
def test_reduce_scatter_and_broadcast(world, fw):
    assert_job_ok(HERE, "scenario_reduce_scatter_and_broadcast", world, framework=fw, timeout=600)


@pytest.mark.parametrize("world", [1, 3])
def test_bad_arguments_and_mismatches_write_nothing(world, fw):
    assert_job_ok(HERE, "scenario_reduction_errors", world, framework=fw)


def test_allreduce_matches_gloo_all_reduce():
    assert_job_ok(HERE, "scenario_allreduce_matches_gloo", 3, timeout=300)
