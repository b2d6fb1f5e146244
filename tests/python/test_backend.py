"""The torch.distributed backend "hpshmem": every op, dtype and size against exact references,
groups, point-to-point, DDP / FSDP2 / tensor parallelism against the same jobs on gloo, functional
collectives compiled against eager, errors on every rank, a dead peer. Real processes; the heavy
matrix (every dtype, two layouts) is marked for `make test-full`."""

import os

import pytest
import torch
from launcher import assert_job_ok, free_port, run_job

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "backend_scenarios.py")
# A small staging block, so that sizes of a few hundred KiB already go through it in chunks.
SMALL_STAGING = {"HYPER_PARALLEL_SHMEM_BACKEND_STAGING": "64k"}


def job(fn, world, *, layout="shm", env=None, timeout=240, **kwargs):
    res = assert_job_ok(
        HERE,
        fn,
        world,
        dist=False,
        layout=layout,
        timeout=timeout,
        env=dict(SMALL_STAGING, **(env or {})),
        kwargs=dict(port=free_port(), **kwargs),
    )
    assert all("OK" in o for o in res.outputs[:1]), res.describe()
    return res


def test_backend_is_registered_by_importing_torch():
    import torch.distributed as dist

    assert "HPSHMEM" in dist.Backend._plugins
    assert dist.Backend._plugins["HPSHMEM"].extended_api


@pytest.mark.parametrize("world", [3, 4])
def test_every_op_against_references(world):
    # 0, 1, a prime, and a size whose collectives go through the 64 KiB staging in chunks.
    job(
        "scenario_every_op",
        world,
        sizes=[0, 1, 13, 20011],
        dtypes=["float32", "bfloat16", "int32", "bool", "complex64"]
        if world == 4
        else ["float64", "float16", "int8", "uint8", "int64"],
    )


@pytest.mark.full
@pytest.mark.parametrize("layout", ["shm", "hosts"])
def test_every_op_every_dtype(layout):
    job("scenario_every_op", 4, layout=layout, sizes=[0, 1, 7, 1031, 40009], timeout=900)


def test_every_op_across_two_simulated_hosts():
    job("scenario_every_op", 4, layout="hosts", sizes=[1, 20011], dtypes=["float32", "int64"], ops=["sum", "max"])


def test_shapes_coalescing_and_heap_tensors():
    job("scenario_shapes_and_coalescing", 3)


def test_groups():
    job("scenario_groups", 4)


@pytest.mark.parametrize("layout", ["shm", "hosts"])
def test_point_to_point(layout):
    job("scenario_p2p", 3 if layout == "shm" else 4, layout=layout)


def _params_of(fn, backend, world, tmp_path, **kw):
    out = str(tmp_path / f"{fn}-{backend}-{kw.get('hook', '')}.pt")
    assert_job_ok(
        HERE,
        fn,
        world,
        dist=False,
        timeout=300,
        env=SMALL_STAGING,
        kwargs=dict(port=free_port(), backend=backend, out=out, **kw),
    )
    return torch.load(out)


@pytest.mark.parametrize("hook", ["none", "fp16", "allreduce"])
def test_ddp_trains_as_on_gloo(tmp_path, hook):
    ours = _params_of("scenario_ddp", "hpshmem", 2, tmp_path, hook=hook)
    theirs = _params_of("scenario_ddp", "gloo", 2, tmp_path, hook=hook)
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)  # two ranks: a + b rounds the same in any order


def test_fsdp2_tensor_parallel_and_compiled_functional_collectives_as_on_gloo(tmp_path):
    ours = _params_of("scenario_fsdp_tp", "hpshmem", 2, tmp_path)
    theirs = _params_of("scenario_fsdp_tp", "gloo", 2, tmp_path)
    for key in ("fsdp", "tp"):
        for a, b in zip(ours[key], theirs[key]):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), key
    assert torch.equal(ours["funcol"], theirs["funcol"])


def test_mismatched_calls_raise_on_every_rank_and_a_new_job_works():
    job("scenario_mismatch", 3, new_port=free_port())  # the new job's store: a port of its own, not port + 1


def test_chunked_calls_mismatched_in_total_raise_on_every_rank_and_write_nothing():
    job("scenario_chunked_mismatch", 3)


def test_group_timeouts_and_monitored_barrier():
    job("scenario_timeouts", 3)


def test_a_dead_peer_fails_the_others_within_seconds():
    res = run_job(HERE, "scenario_peer_dies", 3, dist=False, timeout=60, kwargs=dict(port=free_port()))
    assert not res.timed_out, res.describe()
    for r in range(2):
        assert res.codes[r] == 0, res.describe()
        line = next(ln for ln in res.outputs[r].splitlines() if ln.startswith("RAISED"))
        assert float(line.split()[1]) < 10, line
