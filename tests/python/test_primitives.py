"""The RFC's primitives through the torch handler, in real multi-process jobs.

Each ``scenario_*`` function runs inside every rank (see launcher.py); the
``test_*`` functions start the jobs. Targets are poisoned before each op and
every element is checked after it.
"""
import os
import signal as _signal
import threading
import time
import zlib

import pytest

from launcher import assert_job_ok, run_job

HERE = os.path.abspath(__file__)

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
          "complex64"]
SIZES = [0, 1, 7, 13, 4099, 65537]


# ----------------------------------------------------------------------------- helpers (run in ranks)
def _torch():
    import torch
    return torch


def _random(dtype, n, seed):
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_floating_point or dtype.is_complex:
        return (torch.randn(n, generator=g, dtype=torch.float64) * 100).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype)


def _poison(dtype):
    torch = _torch()
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point or dtype.is_complex:
        return -12345.0
    return 77


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
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    to, frm = (rank + 1) % world, (rank - 1) % world
    cap = max(SIZES) + 16
    for name in DTYPES:
        dtype = getattr(torch, name)
        buf = symm.empty(cap, dtype=dtype)
        for n in SIZES:
            for off in (0, 3):
                buf.fill_(_poison(dtype))
                symm.barrier()
                seed = zlib.crc32(f"{name}:{n}:{off}".encode()) % 1000003  # hash() differs per process
                data = _random(dtype, n + 5, seed * 31 + rank)
                symm.shmem_put(buf, off, data, 5, n, to, block_dim=block_dim)
                symm.barrier()
                want = _random(dtype, n + 5, seed * 31 + frm)[5:]
                assert torch.equal(buf[off:off + n], want), f"put {name} n={n} off={off}"
                rest = torch.cat([buf[:off], buf[off + n:]])
                assert torch.equal(rest, torch.full_like(rest, _poison(dtype))), f"put {name} n={n}: stray write"
                # get: pull what `to` received (it came from this rank) into poisoned local memory
                local = torch.full((n + 9,), _poison(dtype), dtype=dtype)
                symm.shmem_get(local, 2, buf, off, n, to, block_dim=block_dim)
                assert torch.equal(local[2:2 + n], data[5:]), f"get {name} n={n}"
                assert torch.equal(local[:2], torch.full((2,), _poison(dtype), dtype=dtype))
                assert torch.equal(local[2 + n:], torch.full((7,), _poison(dtype), dtype=dtype))
                symm.barrier()
        symm.free(buf)
    assert symm.debug_state()["heap"]["bytes_live"] == 0
    symm.finalize()


def scenario_int_and_tensor_forms(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    a = symm.empty(1000, dtype=torch.float32)
    b = symm.empty(1000, dtype=torch.float32)
    sig = symm.empty(4, dtype=torch.int64)
    sig.zero_()
    a.fill_(-1)
    b.fill_(-1)
    symm.barrier()
    src = _random(torch.float32, 600, rank)
    to = (rank + 1) % world
    i64 = lambda v: torch.tensor([v], dtype=torch.int64)  # noqa: E731
    symm.shmem_put_with_signal(a, 17, src, 3, 557, sig, 1, 5, 1, to)
    symm.shmem_put_with_signal(b, i64(17), src, i64(3), i64(557), sig, i64(2), torch.tensor([5], dtype=torch.int32),
                               torch.tensor([1]), torch.tensor([to]))
    assert symm.shmem_wait_for_signal(None, sig, 1, 5, 0) == 5
    assert symm.shmem_wait_for_signal(a, sig, i64(2), torch.tensor([5], dtype=torch.int32), "eq") == 5
    assert torch.equal(a, b)
    assert torch.equal(a[17:17 + 557], _random(torch.float32, 600, (rank - 1) % world)[3:560])
    symm.barrier()
    symm.finalize()


def scenario_invalid_arguments(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    V, T = ValueError, TypeError
    tgt = symm.empty(64, dtype=torch.float32)
    sig32 = symm.empty(8, dtype=torch.int32)
    sigf = symm.empty(8, dtype=torch.float32)
    tgt.fill_(-7)
    sig32.zero_()
    symm.barrier()
    src = torch.ones(64)
    local = torch.zeros(64)
    to = (rank + 1) % world
    put, get = symm.shmem_put, symm.shmem_get
    cases = [
        (V, "target is not a symmetric tensor", put, local, 0, src, 0, 4, to),
        (T, "src must be a torch tensor", put, tgt, 0, [1.0], 0, 4, to),
        (T, "same dtype", put, tgt, 0, src.double(), 0, 4, to),
        (V, "target_offset must be >= 0", put, tgt, -1, src, 0, 4, to),
        (V, "exceeds target's 64 elements", put, tgt, 10, src, 0, 55, to),
        (V, "exceeds src's 64 elements", put, tgt, 0, src, 10, 55, to),
        (V, "target_rank", put, tgt, 0, src, 0, 4, world),
        (V, "target_rank -1", put, tgt, 0, src, 0, 4, -1),
        (T, "size must be an int", put, tgt, 0, src, 0, 4.0, to),
        (T, "target_offset must be an int or a one-element integer tensor, got bool", put, tgt, True, src, 0, 4, to),
        (V, "one-element", put, tgt, torch.tensor([1, 2]), src, 0, 4, to),
        (T, "dtype torch.float32", put, tgt, torch.tensor([1.0]), src, 0, 4, to),
        (V, "contiguous", put, tgt, 0, torch.ones(64, 2)[:, 0], 0, 4, to),
        (V, "src is not a symmetric tensor", get, local, 0, src, 0, 4, to),
        (V, "exceeds target's 64 elements", get, local, 60, tgt, 0, 5, to),
        (T, "signal must be an int32 or int64 tensor", symm.shmem_signal_op, sigf, 0, 1, 0, to),
        (V, "signal is not a symmetric tensor", symm.shmem_signal_op, torch.zeros(2, dtype=torch.int32), 0, 1, 0, to),
        (V, "signal_offset 8 is out of range", symm.shmem_signal_op, sig32, 8, 1, 0, to),
        (V, "signal_op 2", symm.shmem_signal_op, sig32, 0, 1, 2, to),
        (V, "signal_op 'mul'", symm.shmem_signal_op, sig32, 0, 1, "mul", to),
        (V, "signal_value 2147483648 does not fit", symm.shmem_signal_op, sig32, 0, 2 ** 31, 0, to),
        (V, "compare_op 6", symm.shmem_wait_for_signal, None, sig32, 0, 0, 6),
        (V, "compare_op 'approx'", symm.shmem_wait_for_signal, None, sig32, 0, 0, "approx"),
        (V, "compare_value -2147483649", symm.shmem_wait_for_signal, None, sig32, 0, -2 ** 31 - 1, 0),
        (T, "depend_tensor", symm.shmem_wait_for_signal, "x", sig32, 0, 0, 0),
        (V, "signal_offset must be >= 0", symm.shmem_put_with_signal, tgt, 0, src, 0, 4, sig32, -1, 1, 0, to),
        (V, "signal_value", symm.shmem_put_with_signal, tgt, 0, src, 0, 4, sig32, 0, 2 ** 40, 0, to),
        (V, "signal_op 9", symm.shmem_put_with_signal, tgt, 0, src, 0, 4, sig32, 0, 1, 9, to),
        (T, "signal must be an int32 or int64", symm.shmem_put_with_signal, tgt, 0, src, 0, 4, sigf, 0, 1, 0, to),
    ]
    for exc, frag, fn, *args in cases:
        _expect(exc, frag, fn, *args)
    _expect(V, "block_dim must be in [1, 64]", put, tgt, 0, src, 0, 4, to, block_dim=0)
    _expect(T, "dtype must be a torch.dtype", symm.empty, 4, dtype="float32")
    _expect(V, "size must be non-negative", symm.empty, -1, dtype=torch.float32)
    symm.barrier()
    # Nothing reached any rank's memory.
    assert torch.equal(tgt, torch.full((64,), -7.0)), "a rejected call wrote data"
    assert torch.equal(sig32, torch.zeros(8, dtype=torch.int32)), "a rejected call wrote a signal"
    symm.barrier()
    symm.finalize()


def scenario_wait_comparisons(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    sigs = {dt: symm.empty(2, dtype=getattr(torch, dt)) for dt in ("int32", "int64")}
    step = symm.empty(1, dtype=torch.int64)
    for s in sigs.values():
        s.zero_()
    step.zero_()
    symm.barrier()
    cases = [("eq", 0, -7, -8, -7), ("gt", 1, -7, -7, -6), ("lt", 2, -7, -7, -8), ("ne", 3, -7, -7, -9),
             ("ge", 4, -7, -8, -7), ("le", 5, -7, -6, -7), ("gt", "gt", -3 * 10 ** 9, -4 * 10 ** 9, -2 * 10 ** 9)]
    k = 0
    for name, code, cmp_to, before, after in cases:
        for dt, s in sigs.items():
            if dt == "int32" and abs(cmp_to) > 2 ** 31:
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
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    counters = symm.empty(world, dtype=torch.int64)
    counters.zero_()
    symm.barrier()
    one = torch.tensor([1], dtype=torch.int64)
    for i in range(iters):
        symm.shmem_signal_op(counters, 0, one if i % 2 else 1, 1, (rank + i) % world)
    symm.barrier()
    assert int(counters[0]) == iters, f"lost updates: {int(counters[0])} != {iters}"
    symm.finalize()


def scenario_gil_release(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    sig = symm.empty(2, dtype=torch.int32)
    sig.zero_()
    symm.barrier()
    seen = {}

    def waiter():
        seen["v"] = symm.shmem_wait_for_signal(None, sig, 0, 3, "ge")

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)  # the waiter is blocked in C++ now; this thread must still run Python
    assert t.is_alive()
    for _ in range(3):
        symm.shmem_signal_op(sig, 0, 1, "add", rank)  # signal ourselves from another thread
    t.join(timeout=10)
    assert not t.is_alive() and seen["v"] == 3
    symm.barrier()
    symm.finalize()


def scenario_use_after_free(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    t = symm.empty(10, dtype=torch.float32)
    keep = symm.empty(5, dtype=torch.float32)
    assert symm.is_symmetric(t) and symm.is_symmetric(t[3:])
    symm.free(t)
    assert t.numel() == 0, "a freed tensor must not reach the heap"
    assert not symm.is_symmetric(t)
    _expect(ValueError, "not a symmetric tensor", symm.shmem_put, t, 0, torch.ones(1), 0, 0, 0)
    _expect(symm.InvalidFreeError, "not in the symmetric heap", symm.free, torch.ones(3))
    _expect(symm.CollectiveMismatchError, "differs between ranks", symm.free, keep if rank == 0 else torch.ones(3))
    d = symm.debug_state()
    assert d["heap"]["bytes_live"] == 64, d
    symm.finalize()
    assert keep.numel() == 0, "finalize detaches every symmetric tensor"


def scenario_killed_rank(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    sig = symm.empty(1, dtype=torch.int64)
    sig.zero_()
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
    assert f"{world - 1}" in str(ei.value) and "exited or were killed" in str(ei.value), str(ei.value)
    assert ei.value.code == "peer_dead"
    assert dt < 5, f"noticed after {dt:.1f} s"
    os._exit(0)  # skip finalize and torch's teardown: the job is broken


def scenario_timeout(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    sig = symm.empty(4, dtype=torch.int32)
    sig.zero_()
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


def scenario_empty_forms(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    a = symm.empty(4096, dtype=torch.float16)
    b = symm.empty((2, 3), torch.float32)
    c = symm.empty(2, 3, dtype=torch.int8)
    d = symm.empty([4, 0], dtype=torch.int64)
    e = symm.empty(torch.Size([5]), dtype=torch.bfloat16)
    f = symm.empty(3)
    assert a.shape == (4096,) and a.dtype == torch.float16
    assert b.shape == (2, 3) and c.shape == (2, 3) and d.shape == (4, 0) and e.shape == (5,)
    assert f.dtype == torch.get_default_dtype()
    for t in (a, b, c, d, e, f):
        assert symm.is_symmetric(t)
        assert t.device.type == "cpu"
    assert not symm.is_symmetric(torch.ones(3))
    # Zero copy: a peer's put shows up in this rank's tensor object itself.
    b.fill_(0)
    symm.barrier()
    symm.shmem_put(b, 0, torch.arange(6, dtype=torch.float32) + rank, 0, 6, (rank + 1) % world)
    symm.barrier()
    assert torch.equal(b, (torch.arange(6, dtype=torch.float32) + (rank - 1) % world).view(2, 3))
    ptr = b.data_ptr()
    symm.barrier()
    assert b.data_ptr() == ptr
    assert symm.get_rank() == rank and symm.get_world_size() == world
    st = symm.debug_state()
    assert st["platform"] == "torch" and st["python_live_tensors"] == 6 and len(st["heap"]["live_allocations"]) == 6
    symm.finalize()


def scenario_allocation_mismatch(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    symm.empty(10, dtype=torch.float32)
    with pytest.raises(symm.CollectiveMismatchError) as ei:
        symm.empty(11 if rank == world - 1 else 10, dtype=torch.float32)
    assert "malloc(44 bytes" in str(ei.value) and "malloc(40 bytes" in str(ei.value), str(ei.value)
    x = symm.empty(10, dtype=torch.float32)  # matching calls go on working
    assert symm.is_symmetric(x)
    symm.finalize()


def scenario_heap_exhaustion(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    a = symm.empty(600 * 1024, dtype=torch.uint8)
    with pytest.raises(symm.HeapExhaustedError) as ei:
        symm.empty(600 * 1024, dtype=torch.uint8)
    assert isinstance(ei.value, MemoryError)
    assert "SYMMETRIC_MEMORY_HEAP_SIZE" in str(ei.value) and "614400 of 1048576 bytes live" in str(ei.value)
    symm.free(a)
    symm.empty(600 * 1024, dtype=torch.uint8)
    symm.finalize()


def scenario_rendezvous(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    t = symm.empty(100, dtype=torch.float32)
    t.fill_(-1)
    h = symm.rendezvous(t)
    assert h.rank == rank and h.world_size == world and len(h.buffer_ptrs) == world
    assert h.buffer_ptrs[rank] == t.data_ptr()
    symm.barrier()
    peer = (rank + 1) % world
    view = h.get_buffer(peer, (10,), torch.float32, storage_offset=rank * 10)
    view.copy_(torch.full((10,), float(rank)))  # direct stores into the peer's memory
    as_int = h.get_buffer(peer, 4, torch.int32, storage_offset=90 + 4 * 0)
    assert as_int.shape == (4,)
    with pytest.raises(ValueError):
        h.get_buffer(peer, (11,), torch.float32, storage_offset=90)
    symm.barrier()
    frm = (rank - 1) % world
    assert torch.equal(t[frm * 10:frm * 10 + 10], torch.full((10,), float(frm)))
    others = torch.cat([t[:frm * 10], t[frm * 10 + 10:]])
    assert torch.equal(others, torch.full_like(others, -1))
    symm.finalize()


def scenario_reinit(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    for round_ in range(3):
        t = symm.empty(8, dtype=torch.int32)
        t.fill_(-1)
        symm.barrier()
        symm.shmem_put(t, 0, torch.full((8,), round_ * 10 + rank, dtype=torch.int32), 0, 8, (rank + 1) % world)
        symm.barrier()
        assert torch.equal(t, torch.full((8,), round_ * 10 + (rank - 1) % world, dtype=torch.int32))
        symm.finalize()
        assert t.numel() == 0


def scenario_endpoint_bootstrap(rank, world):
    torch = _torch()
    import hyper_parallel.core.symmetric_memory as symm
    t = symm.empty(4, dtype=torch.int64)
    t.zero_()
    symm.barrier()
    symm.shmem_signal_op(t, rank, rank + 1, "set", 0)
    symm.barrier()
    if rank == 0:
        assert t.tolist()[:world] == list(range(1, world + 1))
    assert symm.debug_state()["config"]["authenticated"] is True
    symm.finalize()


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("world", [2, 3])
def test_put_get_every_dtype_and_odd_size(world):
    assert_job_ok(HERE, "scenario_put_get_all_dtypes", world, timeout=300)


def test_put_get_with_block_dim_4_ranks():
    assert_job_ok(HERE, "scenario_put_get_all_dtypes", 4, timeout=300, kwargs={"block_dim": 3})


@pytest.mark.parametrize("world", [2, 4])
def test_int_and_tensor_arguments_agree(world):
    assert_job_ok(HERE, "scenario_int_and_tensor_forms", world)


@pytest.mark.parametrize("world", [2, 3])
def test_invalid_arguments_raise_and_write_nothing(world):
    assert_job_ok(HERE, "scenario_invalid_arguments", world)


def test_all_six_comparisons_with_negative_values():
    assert_job_ok(HERE, "scenario_wait_comparisons", 2)


def test_concurrent_adds_lose_nothing():
    assert_job_ok(HERE, "scenario_concurrent_adds", 4)


def test_gil_released_while_waiting():
    assert_job_ok(HERE, "scenario_gil_release", 2, env={"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": "10"})


def test_use_after_free_and_bad_frees():
    assert_job_ok(HERE, "scenario_use_after_free", 3)


def test_killed_rank_is_reported():
    res = run_job(HERE, "scenario_killed_rank", 3, env={"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": "60"})
    assert not res.timed_out, res.describe()
    assert res.codes[:2] == [0, 0] and res.codes[2] == -_signal.SIGKILL, res.describe()


def test_timeout_names_rank_signal_relation_and_value():
    assert_job_ok(HERE, "scenario_timeout", 2, env={"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": "1"})


def test_empty_forms_zero_copy_and_debug_state():
    assert_job_ok(HERE, "scenario_empty_forms", 3)


def test_allocation_mismatch_raises_on_every_rank():
    assert_job_ok(HERE, "scenario_allocation_mismatch", 3)


def test_heap_exhaustion_message():
    assert_job_ok(HERE, "scenario_heap_exhaustion", 2, env={"SYMMETRIC_MEMORY_HEAP_SIZE": "1m"})


@pytest.mark.parametrize("world", [2, 4])
def test_rendezvous_peer_views(world):
    assert_job_ok(HERE, "scenario_rendezvous", world)


def test_finalize_and_reinit_back_to_back():
    assert_job_ok(HERE, "scenario_reinit", 3)


def test_endpoint_bootstrap_with_secret_without_store():
    from launcher import free_port
    env = {"HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
           "HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET": "s3cret"}
    assert_job_ok(HERE, "scenario_endpoint_bootstrap", 3, env=env, dist=False)
