"""The RFC's primitives through each framework's handler, in real multi-process jobs.

Each ``scenario_*`` function runs inside every rank (see launcher.py) and is written once
over frameworks.py, so the torch and MindSpore suites run the same scenarios; the
``test_*`` functions start the jobs, once per framework. Targets are poisoned before each
op and every element is checked after it.
"""

import os
import re
import signal as _signal
import threading
import time

import numpy as np
import pytest
from frameworks import current, equal, poison, seed_of
from launcher import assert_job_ok, run_job

HERE = os.path.abspath(__file__)

SIZES = [0, 1, 7, 13, 4099, 65537]


def _expect(exc_types, fragment, fn, *args, **kw):
    import hyper_parallel.core.symmetric_memory as symm

    try:
        fn(*args, **kw)
    except exc_types as e:
        assert fragment in str(e), f"{fn.__name__}: message {str(e)!r} does not name {fragment!r}"
        assert isinstance(e, symm.ShmemError), f"{type(e)} is not a ShmemError"
        return e
    raise AssertionError(f"{fn.__name__}{args} did not raise {exc_types} ({fragment})")


# ----------------------------------------------------------------------------- scenarios
def scenario_put_get_all_dtypes(rank, world, block_dim=None):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    to, frm = (rank + 1) % world, (rank - 1) % world
    cap = max(SIZES) + 16
    for name in F.dtypes:
        buf = symm.empty(cap, dtype=F.dtype(name))
        for n in SIZES:
            for off in (0, 3):
                F.fill(buf, poison(name))
                symm.barrier()
                seed = seed_of(name, n, off)
                data = F.random(name, n + 5, seed * 31 + rank)
                symm.shmem_put(buf, off, data, 5, n, to, block_dim=block_dim)
                symm.barrier()
                want = F.bits(F.random(name, n + 5, seed * 31 + frm))[5:]
                got = F.bits(buf)
                assert np.array_equal(got[off : off + n], want), f"put {name} n={n} off={off}"
                rest = np.concatenate([got[:off], got[off + n :]])
                assert equal(rest, F.bits(F.full(cap - n, poison(name), name))), f"put {name} n={n}: stray write"
                # get: pull what `to` received (it came from this rank) into poisoned local memory
                local = F.full(n + 9, poison(name), name)
                symm.shmem_get(local, 2, buf, off, n, to, block_dim=block_dim)
                lb, pb = F.bits(local), F.bits(F.full(n + 9, poison(name), name))
                assert np.array_equal(lb[2 : 2 + n], F.bits(data)[5:]), f"get {name} n={n}"
                assert np.array_equal(lb[:2], pb[:2]) and np.array_equal(lb[2 + n :], pb[2 + n :]), "get: stray write"
                symm.barrier()
        symm.free(buf)
    assert symm.debug_state()["heap"]["bytes_live"] == 0
    symm.finalize()


def scenario_int_and_tensor_forms(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    a = symm.empty(1000, dtype=F.dtype("float32"))
    b = symm.empty(1000, dtype=F.dtype("float32"))
    sig = symm.empty(4, dtype=F.dtype("int64"))
    F.fill(sig, 0)
    F.fill(a, -1)
    F.fill(b, -1)
    symm.barrier()
    src = F.random("float32", 600, rank)
    to = (rank + 1) % world
    i64 = lambda v: F.tensor([v], "int64")  # noqa: E731
    symm.shmem_put_with_signal(a, 17, src, 3, 557, sig, 1, 5, 1, to)
    symm.shmem_put_with_signal(
        b,
        i64(17),
        src,
        i64(3),
        i64(557),
        sig,
        i64(2),
        F.tensor([5], "int32"),
        F.tensor([1], "int64"),
        F.tensor([to], "int64"),
    )
    assert symm.shmem_wait_for_signal(None, sig, 1, 5, 0) == 5
    assert symm.shmem_wait_for_signal(a, sig, i64(2), F.tensor([5], "int32"), "eq") == 5
    assert equal(a, b)
    assert np.array_equal(F.bits(a)[17 : 17 + 557], F.bits(F.random("float32", 600, (rank - 1) % world))[3:560])
    symm.barrier()
    symm.finalize()


def scenario_invalid_arguments(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    V, T = ValueError, TypeError
    f32 = F.dtype("float32")
    tgt = symm.empty(64, dtype=f32)
    sig32 = symm.empty(8, dtype=F.dtype("int32"))
    sigf = symm.empty(8, dtype=f32)
    F.fill(tgt, -7)
    F.fill(sig32, 0)
    symm.barrier()
    src = F.full(64, 1.0, "float32")
    local = F.full(64, 0.0, "float32")
    to = (rank + 1) % world
    put, get = symm.shmem_put, symm.shmem_get
    cases = [
        (V, "target is not a symmetric tensor", put, local, 0, src, 0, 4, to),
        (T, f"src must be a {F.name} tensor", put, tgt, 0, [1.0], 0, 4, to),
        (T, "same dtype", put, tgt, 0, F.full(64, 1.0, "float64"), 0, 4, to),
        (V, "target_offset must be >= 0", put, tgt, -1, src, 0, 4, to),
        (V, "exceeds target's 64 elements", put, tgt, 10, src, 0, 55, to),
        (V, "exceeds src's 64 elements", put, tgt, 0, src, 10, 55, to),
        (V, "target_rank", put, tgt, 0, src, 0, 4, world),
        (V, "target_rank -1", put, tgt, 0, src, 0, 4, -1),
        (T, "size must be an int", put, tgt, 0, src, 0, 4.0, to),
        (T, "target_offset must be an int or a one-element integer tensor, got bool", put, tgt, True, src, 0, 4, to),
        (V, "one-element", put, tgt, F.tensor([1, 2], "int64"), src, 0, 4, to),
        (T, f"dtype {f32}", put, tgt, F.tensor([1.0], "float32"), src, 0, 4, to),
        (V, "contiguous", put, tgt, 0, F.non_contiguous(64), 0, 4, to),
        (V, "src is not a symmetric tensor", get, local, 0, src, 0, 4, to),
        (V, "exceeds target's 64 elements", get, local, 60, tgt, 0, 5, to),
        (T, "signal must be an int32 or int64 tensor", symm.shmem_signal_op, sigf, 0, 1, 0, to),
        (V, "signal is not a symmetric tensor", symm.shmem_signal_op, F.full(2, 0, "int32"), 0, 1, 0, to),
        (V, "signal_offset 8 is out of range", symm.shmem_signal_op, sig32, 8, 1, 0, to),
        (V, "signal_op 2", symm.shmem_signal_op, sig32, 0, 1, 2, to),
        (V, "signal_op 'mul'", symm.shmem_signal_op, sig32, 0, 1, "mul", to),
        (V, "signal_value 2147483648 does not fit", symm.shmem_signal_op, sig32, 0, 2**31, 0, to),
        (V, "compare_op 6", symm.shmem_wait_for_signal, None, sig32, 0, 0, 6),
        (V, "compare_op 'approx'", symm.shmem_wait_for_signal, None, sig32, 0, 0, "approx"),
        (V, "compare_value -2147483649", symm.shmem_wait_for_signal, None, sig32, 0, -(2**31) - 1, 0),
        (T, "depend_tensor", symm.shmem_wait_for_signal, "x", sig32, 0, 0, 0),
        (V, "signal_offset must be >= 0", symm.shmem_put_with_signal, tgt, 0, src, 0, 4, sig32, -1, 1, 0, to),
        (V, "signal_value", symm.shmem_put_with_signal, tgt, 0, src, 0, 4, sig32, 0, 2**40, 0, to),
        (V, "signal_op 9", symm.shmem_put_with_signal, tgt, 0, src, 0, 4, sig32, 0, 1, 9, to),
        (T, "signal must be an int32 or int64", symm.shmem_put_with_signal, tgt, 0, src, 0, 4, sigf, 0, 1, 0, to),
    ]
    for exc, frag, fn, *args in cases:
        _expect(exc, frag, fn, *args)
    _expect(V, "block_dim must be in [1, 64]", put, tgt, 0, src, 0, 4, to, block_dim=0)
    _expect(T, F.dtype_type_error, symm.empty, 4, dtype="float32")
    _expect(V, "size must be non-negative", symm.empty, -1, dtype=f32)
    symm.barrier()
    # Nothing reached any rank's memory.
    assert equal(tgt, F.full(64, -7.0, "float32")), "a rejected call wrote data"
    assert equal(sig32, F.full(8, 0, "int32")), "a rejected call wrote a signal"
    symm.barrier()
    symm.finalize()


def scenario_wait_comparisons(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    sigs = {dt: symm.empty(2, dtype=F.dtype(dt)) for dt in ("int32", "int64")}
    step = symm.empty(1, dtype=F.dtype("int64"))
    for s in sigs.values():
        F.fill(s, 0)
    F.fill(step, 0)
    symm.barrier()
    cases = [
        ("eq", 0, -7, -8, -7),
        ("gt", 1, -7, -7, -6),
        ("lt", 2, -7, -7, -8),
        ("ne", 3, -7, -7, -9),
        ("ge", 4, -7, -8, -7),
        ("le", 5, -7, -6, -7),
        ("gt", "gt", -3 * 10**9, -4 * 10**9, -2 * 10**9),
    ]
    k = 0
    for name, code, cmp_to, before, after in cases:
        for dt, s in sigs.items():
            if dt == "int32" and abs(cmp_to) > 2**31:
                continue
            k += 1
            if rank == 1:
                symm.shmem_signal_op(s, 1, before, "set", 0)
                symm.shmem_signal_op(step, 0, k, 0, 0)
                time.sleep(0.005)
                symm.shmem_signal_op(s, 1, after, 0, 0)
            elif rank == 0:
                symm.shmem_wait_for_signal(None, step, 0, k, 0)
                for form in (code, name, name.upper()):
                    got = symm.shmem_wait_for_signal(s, s, 1, cmp_to, form)
                    assert got == after, f"{name} {dt}: observed {got}, expected {after}"
            symm.barrier()
    symm.finalize()


def scenario_concurrent_adds(rank, world, iters=20000):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    counters = symm.empty(world, dtype=F.dtype("int64"))
    F.fill(counters, 0)
    symm.barrier()
    one = F.tensor([1], "int64")
    for i in range(iters):
        symm.shmem_signal_op(counters, 0, one if i % 2 else 1, 1, (rank + i) % world)
    symm.barrier()
    assert int(F.values(counters)[0]) == iters, f"lost updates: {int(F.values(counters)[0])} != {iters}"
    symm.finalize()


def _blocked_waiter(compare_value, compare_op):
    """A zeroed symmetric int32 pair, and a thread already blocked in C++ waiting on word 0;
    `seen` gets the wait's value ("v") or its exception ("e")."""
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    sig = symm.empty(2, dtype=F.dtype("int32"))
    F.fill(sig, 0)
    symm.barrier()
    seen = {}

    def waiter():
        try:
            seen["v"] = symm.shmem_wait_for_signal(None, sig, 0, compare_value, compare_op)
        except Exception as e:  # noqa: BLE001 - callers check the class
            seen["e"] = e

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)  # the waiter is blocked in C++ now; this thread must still run Python
    assert t.is_alive()
    return sig, t, seen


def scenario_gil_release(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    sig, t, seen = _blocked_waiter(3, "ge")
    for _ in range(3):
        symm.shmem_signal_op(sig, 0, 1, "add", rank)  # signal ourselves from another thread
    t.join(timeout=10)
    assert not t.is_alive() and seen["v"] == 3
    symm.barrier()
    symm.finalize()


def scenario_finalize_while_waiting(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    sig, t, seen = _blocked_waiter(1, "eq")  # nothing will ever satisfy this wait
    symm.finalize()  # used to unmap the heap under the waiter (SIGSEGV)
    t.join(timeout=10)
    assert not t.is_alive()
    assert isinstance(seen.get("e"), symm.NotInitializedError), repr(seen.get("e"))
    assert "finalized while waiting" in str(seen["e"]), str(seen["e"])
    # After finalize only empty() starts a runtime: the rest raise at once instead of
    # starting a bootstrap that waits for peers who are not coming.
    t0 = time.monotonic()
    for call in (symm.barrier, lambda: symm.shmem_signal_op(sig, 0, 1, "add", 0)):
        try:
            call()
        except symm.NotInitializedError:
            pass
        except symm.ShmemValueError:
            pass  # sig was emptied by finalize: refused as an argument first
        else:
            raise AssertionError("a call after finalize() succeeded")
    assert time.monotonic() - t0 < 2.0


def scenario_meta_and_sparse_arguments(rank, world):
    import torch

    import hyper_parallel.core.symmetric_memory as symm

    t = symm.empty(8, dtype=torch.float32)
    t.fill_(3.0)
    symm.barrier()
    meta = torch.tensor(0, device="meta")
    _expect(symm.ShmemTypeError, "target_offset", symm.shmem_put, t, meta, torch.ones(8), 0, 4, rank)
    _expect(
        symm.ShmemTypeError,
        "src: a torch.sparse_coo tensor",
        symm.shmem_put,
        t,
        0,
        torch.ones(8).to_sparse(),
        0,
        4,
        rank,
    )
    _expect(symm.ShmemTypeError, "size", symm.shmem_put, t, 0, torch.ones(8), 0, meta.to(torch.int64), rank)
    assert torch.equal(t, torch.full((8,), 3.0)), "nothing written"
    symm.finalize()


def scenario_use_after_free(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    f32 = F.dtype("float32")
    t = symm.empty(10, dtype=f32)
    keep = symm.empty(5, dtype=f32)
    assert symm.is_symmetric(t) and symm.is_symmetric(t[3:])
    symm.free(t)
    assert F.numel(t) == 0, "a freed tensor must not reach the heap"
    assert not symm.is_symmetric(t)
    _expect(ValueError, "not a symmetric tensor", symm.shmem_put, t, 0, F.full(1, 1.0, "float32"), 0, 0, 0)
    _expect(symm.InvalidFreeError, "not in the symmetric heap", symm.free, F.full(3, 1.0, "float32"))
    # A double free names what the tensor is now, not a made-up pointer.
    _expect(symm.InvalidFreeError, "freed already", symm.free, t)
    _expect(
        symm.CollectiveMismatchError,
        "differs between ranks",
        symm.free,
        keep if rank == 0 else F.full(3, 1.0, "float32"),
    )
    d = symm.debug_state()
    assert d["heap"]["bytes_live"] == 64, d
    symm.finalize()
    assert F.numel(keep) == 0, "finalize detaches every symmetric tensor"


def scenario_stale_views(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    f32, peer = F.dtype("float32"), (rank + 1) % world
    c = symm.empty(64, dtype=f32)
    c_addr = F.data_ptr(c)
    v = c[2:6]
    symm.free(c)
    assert F.numel(c) == 0
    d = symm.empty(64, dtype=f32)
    assert F.data_ptr(d) != c_addr, "the memory of a live view was handed out again"
    F.fill(d, 5.0)
    F.fill(v, -1.0)  # reaches only the freed block
    symm.barrier()
    symm.shmem_put(d, 0, F.full(64, float(rank), "float32"), 0, 64, peer)
    symm.barrier()
    assert np.array_equal(F.values(d), np.full(64, (rank - 1) % world)), "a peer's put went astray"
    assert np.array_equal(F.values(v), np.full(4, -1.0))
    assert symm.debug_state()["heap"]["freed_pending"] == 1
    # Only rank 1 still has a view: no rank may reuse the block.
    if rank != 1:
        del v
    e = symm.empty(64, dtype=f32)
    assert F.data_ptr(e) != c_addr, "reused while rank 1 still had a view of it"
    symm.free(e)
    if rank == 1:
        del v
    f = symm.empty(64, dtype=f32)
    assert F.data_ptr(f) == c_addr, "the block is reused on every rank once the last view is gone"
    assert symm.debug_state()["heap"]["freed_pending"] == 0
    # A view of a peer's copy from get_buffer (rank 0 only) holds the block too (free empties
    # the get_buffer tensor itself, as it does the tensor from empty()).
    g = symm.empty(16, dtype=f32)
    g_addr = F.data_ptr(g)
    pv = symm.rendezvous(g).get_buffer(peer, (16,), f32)[2:5] if rank == 0 else None
    symm.free(g)
    h = symm.empty(16, dtype=f32)
    assert F.data_ptr(h) != g_addr, "a peer view's memory was handed out again"
    del pv
    symm.free(h)
    # Without views (every dtype path, bfloat16's included) free gives the bytes back at once.
    for name in ("float32", "bfloat16", "int64"):
        b = symm.empty(9, dtype=F.dtype(name))
        addr = F.data_ptr(b)
        symm.free(b)
        b = symm.empty(9, dtype=F.dtype(name))
        assert F.data_ptr(b) == addr, f"{name}: a freed tensor without views still held its memory"
        symm.free(b)
    # After finalize a view reads zeros and its writes go nowhere: no fault, no stale data.
    F.fill(f, 7.0)
    w = f[8:40]
    symm.finalize()
    assert np.array_equal(F.values(w), np.zeros(32)), "a view after finalize reaches old memory"
    F.fill(w, 3.0)


def scenario_fast_path_takes_the_common_case_and_declines_the_rest(rank, world):
    """The binding's fast path does valid calls itself (True) and declines (False) everything the
    Python checks must judge, writing nothing; the public API gives the same results either way."""
    import hyper_parallel.core.symmetric_memory as symm
    from hyper_parallel import _hpshmem as _C

    F = current()
    i64, f32 = F.dtype("int64"), F.dtype("float32")
    t = symm.empty(16, dtype=i64)
    sig = symm.empty(4, dtype=i64)
    F.fill(t, 7)
    F.fill(sig, 0)
    symm.barrier()
    peer = (rank + 1) % world
    src = F.tensor(np.arange(16) + 100 * rank, "int64")
    # The common case: ints and dense tensors, done here.
    assert _C.fast_put(t, 2, src, 3, 5, peer, None) is True
    assert _C.fast_put_signal(t, 8, src, 0, 2, sig, 1, 1, "add", peer, None) is True
    assert _C.fast_signal(sig, 2, 5, 0, peer) is True
    assert _C.fast_signal(sig, 3, 1, "ADD", rank) is True
    assert _C.fast_wait(None, sig, 3, 1, "ge") == 1
    symm.barrier()
    assert _C.fast_wait(t, sig, 1, 1, 0) == 1 and _C.fast_wait(None, sig, 2, 5, "eq") == 5
    left = (rank - 1) % world
    want = np.full(16, 7)
    want[2:7] = np.arange(3, 8) + 100 * left
    want[8:10] = np.arange(0, 2) + 100 * left
    assert np.array_equal(F.values(t), want), F.values(t)
    local = F.full(6, -1, "int64")
    assert _C.fast_get(local, 1, t, 2, 5, rank) is True
    assert np.array_equal(F.values(local), np.concatenate([[-1], want[2:7]]))
    out = symm.empty(world * 3, dtype=i64)
    assert _C.fast_allgather(out, src[:3], "push", None) is True
    assert np.array_equal(F.values(out), np.concatenate([np.arange(3) + 100 * p for p in range(world)]))
    recv = symm.empty(world * 2, dtype=i64)
    assert _C.fast_alltoall([src[2 * p : 2 * p + 2] for p in range(world)], recv, [2] * world, "push", 1) is True
    assert np.array_equal(
        F.values(recv), np.concatenate([np.arange(2 * rank, 2 * rank + 2) + 100 * p for p in range(world)])
    )
    symm.barrier()
    # Everything else is declined, and nothing is written.
    before = F.values(t).copy()
    freed = symm.empty(4, dtype=i64)
    stale = freed[1:]
    symm.free(freed)
    bad_puts = [
        (t, True, src, 0, 1, peer),
        (t, 0, src, 0, 1.0, peer),
        (t, np.int64(0), src, 0, 1, peer),
        (t, -1, src, 0, 1, peer),
        (t, 0, src, 0, 17, peer),
        (t, 12, src, 0, 5, peer),
        (t, 0, src, 12, 5, peer),
        (t, 0, src, 0, 2**63, peer),
        (t, 0, src, 0, 1, world),
        (t, 0, src, 0, 1, -1),
        (t, 0, src, 0, 1, True),
        (t, 0, F.full(4, 1.0, "float32"), 0, 1, peer),
        (src, 0, src, 0, 1, peer),
        (stale, 0, src, 0, 1, peer),
        (t, 0, F.non_contiguous(8), 0, 1, peer),
        (t, 0, [1, 2], 0, 1, peer),
        (t[:0], 0, src, 0, 0, peer),
        (symm.empty(4, dtype=f32), 0, src, 0, 1, peer),
    ]
    for args in bad_puts:
        assert _C.fast_put(*args, None) is False, args
        assert _C.fast_put_signal(*args[:5], sig, 0, 1, 0, args[5], None) is False, args
    assert _C.fast_put(t, 0, src, 0, 1, peer, 0) is False  # block_dim out of [1, 64]
    assert _C.fast_put(t, 0, src, 0, 1, peer, 65) is False
    for sargs in [
        (sig, 4, 1, 0),
        (sig, -1, 1, 0),
        (sig, 0, 2**63, 0),
        (sig, 0, 1, 2),
        (sig, 0, 1, "mul"),
        (sig, 0, 1.5, 0),
        (t[:0], 0, 1, 0),
        (F.full(4, 0, "int64"), 0, 1, 0),
        (symm.empty(4, dtype=f32), 0, 1, 0),
    ]:
        assert _C.fast_signal(*sargs, peer) is False, sargs
        assert _C.fast_put_signal(t, 0, src, 0, 1, *sargs, peer, None) is False, sargs
    if F.name == "torch":  # torch tensors are read from C++ (the reader is part of the build), same rules
        import hyper_parallel._torch_tensor_reader  # noqa: F401
        import torch

        cl = torch.ones(1, 2, 2, 2, dtype=torch.int64).to(memory_format=torch.channels_last)
        for odd in (cl, torch.ones(4, dtype=torch.int64, device="meta"), torch.ones(4, dtype=torch.int64).to_sparse()):
            assert _C.fast_put(t, 0, odd, 0, 1, peer) is False, odd.layout
        param = torch.nn.Parameter(torch.full((3,), 9, dtype=torch.int64), requires_grad=False)
        assert _C.fast_put(t, 13, param, 0, 3, rank) is True
        before[13:16] = 9
    sig32 = symm.empty(2, dtype=F.dtype("int32"))
    assert _C.fast_signal(sig32, 0, 2**31, 0, peer) is False  # does not fit an int32 signal
    for wargs in [(1, sig, 0, 0, 0), (None, sig, 0, 0, 6), (None, sig, 0, 0, "approx"), (None, sig, 9, 0, 0)]:
        assert _C.fast_wait(*wargs) is None, wargs
    assert _C.fast_allgather(out, src[:2], "push", None) is False  # wrong size
    assert _C.fast_allgather(out, src[:3], "sideways", None) is False
    assert _C.fast_alltoall(tuple(src[:2] for _ in range(world)), recv, [2] * world, "push", None) is False
    assert _C.fast_alltoall([src[:2]] * world, recv, [3] * world, "push", None) is False  # more than recv holds
    assert _C.fast_alltoall([src[:2]] * world, recv, [2] * world, "pull", None) is False  # pull needs symmetric sends
    symm.barrier()
    assert np.array_equal(F.values(t), before), "a declined call wrote"
    symm.finalize()


def scenario_killed_rank(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    sig = symm.empty(1, dtype=F.dtype("int64"))
    F.fill(sig, 0)
    symm.barrier()
    if rank == world - 1:
        time.sleep(0.3)
        os.kill(os.getpid(), _signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(symm.PeerDeadError) as ei:
        if rank == 0:
            symm.shmem_wait_for_signal(None, sig, 0, 1, 0)
        else:
            symm.barrier()
    dt = time.monotonic() - t0
    assert f"{world - 1}" in str(ei.value) and re.search("exited or w(ere|as) killed", str(ei.value)), str(ei.value)
    assert ei.value.code == "peer_dead"
    assert dt < 5, f"noticed after {dt:.1f} s"
    os._exit(0)  # skip finalize and the framework's teardown: the job is broken


def scenario_timeout(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    sig = symm.empty(4, dtype=F.dtype("int32"))
    F.fill(sig, 0)
    sig[2] = -4
    symm.barrier()
    if rank == 1:
        with pytest.raises(symm.ShmemTimeoutError) as ei:
            symm.shmem_wait_for_signal(None, sig, 2, 5, "ge")
        msg = str(ei.value)
        for part in ("rank 1", "signal[2]", "(int32) >= 5", "last observed -4", "HYPER_PARALLEL_SHMEM_TIMEOUT_SEC"):
            assert part in msg, (part, msg)
        assert isinstance(ei.value, TimeoutError)
    else:
        time.sleep(1.5)
    symm.barrier()
    symm.finalize()


def scenario_wait_policy(rank, world, pin, mode):
    """Ranks pinned to one CPU (or each to its own) choose how to wait by the ranks sharing
    their CPUs, report it in debug_state(), and still run collectives right."""
    import os

    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    cpus = sorted(os.sched_getaffinity(0))
    if pin == "shared":
        os.sched_setaffinity(0, {cpus[0]})
    elif pin == "own":
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    buf = symm.empty(world * 5, dtype=F.dtype("int32"))
    w = symm.debug_state()["wait"]
    assert w["mode"] == mode, w
    if pin == "shared":
        assert w["cpus"] == 1 and w["ranks_sharing_cpus"] == world and w["oversubscribed"], w
    elif pin == "own":
        assert w["cpus"] == 1 and w["ranks_sharing_cpus"] == 1 and not w["oversubscribed"], w
    if mode == "yield":
        assert w["spin_us"] == 0 and w["yield_us"] > 0, w
    for it in range(50):
        mine = F.full(5, float(rank * 100 + it), "int32")
        symm.shmem_allgather(buf, mine)
        assert F.values(buf).tolist() == [float(q * 100 + it) for q in range(world) for _ in range(5)]
    symm.barrier()
    symm.finalize()


def scenario_empty_forms(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    a = symm.empty(4096, dtype=F.dtype("float16"))
    b = symm.empty((2, 3), F.dtype("float32"))
    c = symm.empty(2, 3, dtype=F.dtype("int8"))
    d = symm.empty([4, 0], dtype=F.dtype("int64"))
    e = symm.empty(F.size_object([5]), dtype=F.dtype("bfloat16"))
    f = symm.empty(3)
    assert F.shape(a) == (4096,) and F.dtype_of(a) == F.dtype("float16")
    assert F.shape(b) == (2, 3) and F.shape(c) == (2, 3) and F.shape(d) == (4, 0) and F.shape(e) == (5,)
    assert F.dtype_of(f) == F.default_dtype
    for t in (a, b, c, d, e, f):
        assert symm.is_symmetric(t)
        assert F.device(t) == "cpu"
    assert not symm.is_symmetric(F.full(3, 1.0, "float32"))
    # Zero copy: a peer's put shows up in this rank's tensor object itself.
    F.fill(b, 0)
    symm.barrier()
    symm.shmem_put(b, 0, F.tensor(np.arange(6) + rank, "float32"), 0, 6, (rank + 1) % world)
    symm.barrier()
    assert np.array_equal(F.bits(b), (np.arange(6, dtype=np.float32) + (rank - 1) % world).reshape(2, 3))
    ptr = F.data_ptr(b)
    symm.barrier()
    assert F.data_ptr(b) == ptr
    assert symm.get_rank() == rank and symm.get_world_size() == world
    st = symm.debug_state()
    assert st["platform"] == F.name and st["python_live_tensors"] == 6 and len(st["heap"]["live_allocations"]) == 6
    symm.finalize()


def scenario_allocation_mismatch(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    f32 = F.dtype("float32")
    symm.empty(10, dtype=f32)
    with pytest.raises(symm.CollectiveMismatchError) as ei:
        symm.empty(11 if rank == world - 1 else 10, dtype=f32)
    assert "malloc(44 bytes" in str(ei.value) and "malloc(40 bytes" in str(ei.value), str(ei.value)
    x = symm.empty(10, dtype=f32)  # matching calls go on working
    assert symm.is_symmetric(x)
    symm.finalize()


def scenario_heap_exhaustion(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    u8 = F.dtype("uint8")
    a = symm.empty(600 * 1024, dtype=u8)
    with pytest.raises(symm.HeapExhaustedError) as ei:
        symm.empty(600 * 1024, dtype=u8)
    assert isinstance(ei.value, MemoryError)
    assert "SYMMETRIC_MEMORY_HEAP_SIZE" in str(ei.value) and "614400 of 1048576 bytes live" in str(ei.value)
    symm.free(a)
    symm.empty(600 * 1024, dtype=u8)
    symm.finalize()


def scenario_rendezvous(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    f32, i32 = F.dtype("float32"), F.dtype("int32")
    t = symm.empty(100, dtype=f32)
    F.fill(t, -1)
    h = symm.rendezvous(t)
    assert h.rank == rank and h.world_size == world and len(h.buffer_ptrs) == world
    assert h.buffer_ptrs[rank] == F.data_ptr(t)
    symm.barrier()
    peer = (rank + 1) % world
    view = h.get_buffer(peer, (10,), f32, storage_offset=rank * 10)
    F.assign(view, F.full(10, float(rank), "float32"))  # direct stores into the peer's memory
    as_int = h.get_buffer(peer, 4, i32, storage_offset=90 + 4 * 0)
    assert F.shape(as_int) == (4,)
    with pytest.raises(ValueError):
        h.get_buffer(peer, (11,), f32, storage_offset=90)
    symm.barrier()
    frm = (rank - 1) % world
    want = np.full(100, -1.0, np.float32)
    want[frm * 10 : frm * 10 + 10] = frm
    assert np.array_equal(F.bits(t), want)
    symm.finalize()


def scenario_start_failure_is_told(rank, world, bad):
    """One rank's settings are refused at start: it raises its own error, and every other rank
    raises within seconds naming it and the reason (not after the bootstrap timeout)."""
    import hyper_parallel.core.symmetric_memory as symm

    if rank == bad:
        os.environ["SYMMETRIC_MEMORY_HEAP_SIZE"] = "lots"
    t0 = time.monotonic()
    try:
        symm.empty(4, dtype=current().dtype("float32"))
    except Exception as e:  # noqa: BLE001 - the kind is checked
        assert "SYMMETRIC_MEMORY_HEAP_SIZE" in str(e), f"{type(e).__name__}: {e}"
        if rank != bad:
            assert isinstance(e, symm.BootstrapError) and f"rank {bad} failed to start" in str(e), str(e)
        assert time.monotonic() - t0 < 20, f"took {time.monotonic() - t0:.1f} s"
    else:
        raise AssertionError(f"rank {rank}: the job started")


def scenario_reinit(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    for round_ in range(3):
        t = symm.empty(8, dtype=F.dtype("int32"))
        F.fill(t, -1)
        symm.barrier()
        symm.shmem_put(t, 0, F.full(8, round_ * 10 + rank, "int32"), 0, 8, (rank + 1) % world)
        symm.barrier()
        assert equal(t, F.full(8, round_ * 10 + (rank - 1) % world, "int32"))
        symm.finalize()
        assert F.numel(t) == 0


def scenario_endpoint_bootstrap(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    t = symm.empty(4, dtype=F.dtype("int64"))
    F.fill(t, 0)
    symm.barrier()
    symm.shmem_signal_op(t, rank, rank + 1, "set", 0)
    symm.barrier()
    if rank == 0:
        assert F.values(t).tolist()[:world] == list(range(1, world + 1))
    assert symm.debug_state()["config"]["authenticated"] is True
    symm.finalize()


def scenario_framework_made_sources(rank, world):
    """Tensors produced by the framework's own (possibly queued) ops serve as src, and a
    symmetric tensor written by a still-queued framework op before a barrier reaches the
    peers complete (the API drains the framework's queue before touching memory)."""
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    n = 100003
    for name in ("float32", "int32", "bfloat16"):
        dst = symm.empty(n, dtype=F.dtype(name))
        staging = symm.empty(n, dtype=F.dtype(name))
        F.fill(dst, poison(name))
        F.fill(staging, poison(name))
        symm.barrier()
        src = F.op_result(n, name)  # 2 * arange(n), computed by the framework
        symm.shmem_put(dst, 0, src, 0, n, (rank + 1) % world)
        F.queued_write(staging, F.op_result(n, name))
        symm.barrier()  # no tensor of ours is handed to this call: only the drain orders the write
        assert equal(dst, F.op_result(n, name)), f"{name}: put from an op result"
        local = F.full(n, poison(name), name)
        symm.shmem_get(local, 0, staging, 0, n, (rank + 1) % world)
        assert equal(local, F.op_result(n, name)), f"{name}: get of framework-written symmetric memory"
        symm.barrier()
    symm.finalize()


def scenario_mindspore_graph_mode_is_refused_by_name(rank, world):
    """Inside an ms.jit function the API cannot run (it drives the runtime between operators);
    the compiler must say which call, and nothing may have been written."""
    import tempfile

    import mindspore as ms

    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    buf = symm.empty(8, dtype=ms.float32)
    sig = symm.empty(1, dtype=ms.int32)
    F.fill(buf, -1.0)
    F.fill(sig, 0)
    symm.barrier()

    @ms.jit
    def step(x):
        y = x * 2
        symm.shmem_put_with_signal(buf, 0, y, 0, 8, sig, 0, 1, 0, (rank + 1) % world)
        return y

    os.chdir(tempfile.mkdtemp())  # the compiler leaves its analysis files in the working directory
    with pytest.raises(RuntimeError) as ei:
        step(F.full(8, 1.0, "float32"))
    assert "hyper_parallel.core.symmetric_memory.shmem_put_with_signal" in str(ei.value), str(ei.value)[:500]
    assert "GRAPH_MODE" in str(ei.value)
    symm.barrier()
    assert equal(buf, F.full(8, -1.0, "float32")) and equal(sig, F.full(1, 0, "int32"))
    symm.finalize()


# ----------------------------------------------------------------------------- tests
# `fw` (conftest.py) runs every test once per framework.
@pytest.mark.parametrize("world", [2, 3])
def test_put_get_every_dtype_and_odd_size(world, fw):
    assert_job_ok(HERE, "scenario_put_get_all_dtypes", world, timeout=300, framework=fw)


def test_put_get_with_block_dim_4_ranks(fw):
    assert_job_ok(HERE, "scenario_put_get_all_dtypes", 4, timeout=300, kwargs={"block_dim": 3}, framework=fw)


@pytest.mark.parametrize("world", [2, 4])
def test_int_and_tensor_arguments_agree(world, fw):
    assert_job_ok(HERE, "scenario_int_and_tensor_forms", world, framework=fw)


@pytest.mark.parametrize("world", [2, 3])
def test_invalid_arguments_raise_and_write_nothing(world, fw):
    assert_job_ok(HERE, "scenario_invalid_arguments", world, framework=fw)


def test_all_six_comparisons_with_negative_values(fw):
    assert_job_ok(HERE, "scenario_wait_comparisons", 2, framework=fw)


def test_concurrent_adds_lose_nothing(fw):
    assert_job_ok(HERE, "scenario_concurrent_adds", 4, framework=fw)


def test_gil_released_while_waiting(fw):
    assert_job_ok(HERE, "scenario_gil_release", 2, env={"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": "10"}, framework=fw)


def test_infinite_timeout_waits_instead_of_failing_at_once():
    # "inf" reaches the framework's rendezvous too (torch's store takes no infinite timedelta).
    assert_job_ok(HERE, "scenario_gil_release", 2, env={"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": "inf"})


def test_finalize_while_another_thread_waits(fw):
    assert_job_ok(HERE, "scenario_finalize_while_waiting", 2, framework=fw)


def test_meta_and_sparse_arguments_are_type_errors():
    assert_job_ok(HERE, "scenario_meta_and_sparse_arguments", 2)


def test_use_after_free_and_bad_frees(fw):
    assert_job_ok(HERE, "scenario_use_after_free", 3, framework=fw)


def test_views_outliving_free_or_finalize_never_reach_later_memory(fw):
    assert_job_ok(HERE, "scenario_stale_views", 3, framework=fw)


@pytest.mark.parametrize("world", [2, 3])
def test_fast_path_takes_the_common_case_and_declines_the_rest(world, fw):
    assert_job_ok(HERE, "scenario_fast_path_takes_the_common_case_and_declines_the_rest", world, framework=fw)


def test_killed_rank_is_reported(fw):
    res = run_job(HERE, "scenario_killed_rank", 3, env={"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": "60"}, framework=fw)
    assert not res.timed_out, res.describe()
    assert res.codes[:2] == [0, 0] and res.codes[2] == -_signal.SIGKILL, res.describe()


def test_timeout_names_rank_signal_relation_and_value(fw):
    assert_job_ok(HERE, "scenario_timeout", 2, env={"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": "1"}, framework=fw)


@pytest.mark.parametrize(
    "pin,mode,env",
    [("shared", "yield", None), ("shared", "spin", "spin"), ("own", "spin", None), ("none", "custom", "3,50")],
)
def test_wait_policy_follows_the_cpus_ranks_share(pin, mode, env):
    world = 2 if pin == "own" else 3
    assert_job_ok(
        HERE,
        "scenario_wait_policy",
        world,
        kwargs={"pin": pin, "mode": mode},
        env={"HYPER_PARALLEL_SHMEM_WAIT": env} if env else None,
    )


def scenario_bad_wait_setting(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    with pytest.raises(symm.ShmemValueError, match="HYPER_PARALLEL_SHMEM_WAIT='soon'"):
        symm.empty(4, dtype=F.dtype("int32"))


def test_bad_wait_setting_is_refused_by_name():
    assert_job_ok(HERE, "scenario_bad_wait_setting", 2, env={"HYPER_PARALLEL_SHMEM_WAIT": "soon"})


def test_empty_forms_zero_copy_and_debug_state(fw):
    assert_job_ok(HERE, "scenario_empty_forms", 3, framework=fw)


def test_allocation_mismatch_raises_on_every_rank(fw):
    assert_job_ok(HERE, "scenario_allocation_mismatch", 3, framework=fw)


def test_heap_exhaustion_message(fw):
    assert_job_ok(HERE, "scenario_heap_exhaustion", 2, env={"SYMMETRIC_MEMORY_HEAP_SIZE": "1m"}, framework=fw)


@pytest.mark.parametrize("world", [2, 4])
def test_rendezvous_peer_views(world, fw):
    assert_job_ok(HERE, "scenario_rendezvous", world, framework=fw)


@pytest.mark.parametrize("bad", [0, 2])
def test_a_rank_that_fails_to_start_is_named_by_the_others_at_once(fw, bad):
    assert_job_ok(HERE, "scenario_start_failure_is_told", 3, framework=fw, kwargs={"bad": bad}, timeout=120)


def test_finalize_and_reinit_back_to_back(fw):
    assert_job_ok(HERE, "scenario_reinit", 3, framework=fw)


def test_endpoint_bootstrap_with_secret_without_store(fw):
    from launcher import free_port

    env = {
        "HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
        "HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET": "s3cret",
    }
    assert_job_ok(HERE, "scenario_endpoint_bootstrap", 3, env=env, dist=False, framework=fw)


@pytest.mark.parametrize("world", [2, 3])
def test_tensors_made_by_framework_ops(world, fw):
    assert_job_ok(HERE, "scenario_framework_made_sources", world, framework=fw)


def test_mindspore_graph_mode_is_refused_by_name():
    assert_job_ok(HERE, "scenario_mindspore_graph_mode_is_refused_by_name", 2, framework="mindspore")
