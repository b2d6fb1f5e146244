"""MindSpore graph mode (ms.jit): the primitives as custom operators inside compiled graphs,
in real multi-process jobs. MindSpore only: torch has no graph mode to serve."""

import os

import numpy as np
from frameworks import current, equal, poison, seed_of
from launcher import assert_job_ok

HERE = os.path.abspath(__file__)


def scenario_graph_ring(rank, world, n=1009, rounds=5):
    import tempfile

    import mindspore as ms
    from mindspore import ops

    import hyper_parallel.core.symmetric_memory as symm
    from hyper_parallel.platform.mindspore.symmetric_memory import graph as sg

    F = current()
    os.chdir(tempfile.mkdtemp())  # the graph compiler may leave files in the working directory
    to, frm = (rank + 1) % world, (rank - 1) % world
    buf = symm.empty(n + 3, dtype=ms.float32)
    sig = symm.empty(4, dtype=ms.int64)
    counter = symm.empty(1, dtype=ms.int32)
    F.fill(buf, poison("float32"))
    F.fill(sig, 0)
    F.fill(counter, 0)
    symm.barrier()

    @ms.jit
    def step(data_buf, signal, count, x, it):
        y = x * 2 + 1  # computed by the graph, then pushed by the graph
        sg.shmem_put_with_signal(data_buf, 3, y, 0, n, signal, 1, it, "set", to)  # token unused: still runs
        sg.shmem_signal_op(count, 0, 1, "add", 0)
        seen = sg.shmem_wait_for_signal(y, signal, 1, it, "ge")
        return ops.depend(data_buf, seen)[3 : 3 + n].sum(), seen

    for it in range(1, rounds + 1):
        x = F.random("float32", n, seed_of(rank, it), small=True)
        total, seen = step(buf, sig, counter, x, ms.Tensor([it], ms.int64))
        want = F.values(F.random("float32", n, seed_of(frm, it), small=True)).astype(np.float32) * 2 + 1
        got = F.bits(buf)
        assert np.array_equal(got[3:], want), f"round {it}: graph put_with_signal"
        assert np.array_equal(got[:3], np.full(3, poison("float32"), np.float32)), "stray write"
        assert int(seen.asnumpy()[0]) == it
        assert abs(float(total.asnumpy()) - float(want.astype(np.float64).sum())) < 1e-2 * n
        symm.barrier()  # nobody overwrites a peer's buffer before the peer has checked it

    @ms.jit
    def pull(local, data_buf):
        tok = sg.shmem_get(local, 0, data_buf, 3, n, to)
        return ops.depend(local, tok).sum()

    local = F.full(n, poison("float32"), "float32")
    pull(local, buf)
    mine = F.values(F.random("float32", n, seed_of(rank, rounds), small=True)).astype(np.float32) * 2 + 1
    assert np.array_equal(F.bits(local), mine), "graph get"

    @ms.jit
    def sync(depend):
        return sg.barrier(depend)

    assert int(sync(buf).asnumpy()[0]) == 1
    if rank == 0:
        assert int(F.values(counter)[0]) == rounds * world, F.values(counter)
    symm.finalize()


def scenario_graph_errors(rank, world):
    import tempfile

    import mindspore as ms

    import hyper_parallel.core.symmetric_memory as symm
    from hyper_parallel.platform.mindspore.symmetric_memory import graph as sg

    F = current()
    os.chdir(tempfile.mkdtemp())
    buf = symm.empty(8, dtype=ms.float32)
    sig = symm.empty(2, dtype=ms.int32)
    sigf = symm.empty(2, dtype=ms.float32)
    F.fill(buf, -1.0)
    F.fill(sig, 0)
    symm.barrier()
    to = (rank + 1) % world

    @ms.jit
    def past_end(data_buf, x):
        return sg.shmem_put(data_buf, 5, x, 0, 8, to)

    @ms.jit
    def bad_rank(data_buf, x):
        return sg.shmem_put(data_buf, 0, x, 0, 8, world)

    @ms.jit
    def float_signal(data_buf, signal, x):
        return sg.shmem_put_with_signal(data_buf, 0, x, 0, 8, signal, 0, 1, 0, to)

    @ms.jit
    def bad_compare(signal, d):
        return sg.shmem_wait_for_signal(d, signal, 0, 1, 9)

    x = F.full(8, 3.0, "float32")
    # The kernels' messages are the Python API's (one home: ops/checks): the same call eagerly.
    eager = {
        past_end: lambda: symm.shmem_put(buf, 5, x, 0, 8, to),
        bad_rank: lambda: symm.shmem_put(buf, 0, x, 0, 8, world),
        bad_compare: lambda: symm.shmem_wait_for_signal(x, sig, 0, 1, 9),
    }
    for fn, args, reason in (
        (past_end, (buf, x), "shmem_put: target_offset + size = 5 + 8 = 13 exceeds target's 8"),
        (bad_rank, (buf, x), f"target_rank {world} is out of range"),
        (float_signal, (buf, sigf, x), "signal must be an int32 or int64 tensor, got float32"),
        (bad_compare, (sig, x), "compare_op 9 is not one of"),
    ):
        try:
            fn(*args)
        except RuntimeError:
            assert reason in sg.last_error(), (reason, sg.last_error())
        else:
            raise AssertionError(f"{fn.__name__} did not raise")
        if fn in eager:
            try:
                eager[fn]()
            except symm.ShmemValueError as e:
                assert sg.last_error().endswith(": " + str(e)), (sg.last_error(), str(e))
            else:
                raise AssertionError(f"{fn.__name__}: the eager call did not raise")
    symm.barrier()
    assert equal(buf, F.full(8, -1.0, "float32")) and equal(sig, F.full(2, 0, "int32")), "a rejected op wrote"
    symm.finalize()


def test_graph_mode_put_signal_wait_get_barrier_3_ranks():
    assert_job_ok(HERE, "scenario_graph_ring", 3, framework="mindspore", timeout=240)


def test_graph_mode_bad_arguments_raise_and_write_nothing():
    assert_job_ok(HERE, "scenario_graph_errors", 2, framework="mindspore")
