"""Collectives on groups of ranks: two groups of 2 inside 4 ranks running different collectives
at the same time and back to back, against NumPy references (and torch's own groups); group
rendezvous; bad groups raising before anything is written; a killed member failing its own
group only. Real processes, once per framework.
"""

import os
import signal as _signal
import time

import numpy as np
import pytest
from frameworks import current, poison, seed_of
from launcher import assert_job_ok, run_job

HERE = os.path.abspath(__file__)
A, B = [0, 2], [3, 1]  # B's group order differs from rank order on purpose


def _data(name, shape, seed):
    return current().random(name, shape, seed, small=True)


def _groups(rank, use_torch_groups):
    """(this rank's group, its members in group-rank order): as lists of ranks, or as torch
    ProcessGroups (new_group is collective over the whole job, so every rank makes both; torch
    orders a group's ranks by global rank)."""
    mine = A if rank in A else B
    if not use_torch_groups:
        return list(mine), mine
    import torch.distributed as dist

    ga, gb = dist.new_group(A), dist.new_group(B)
    return (ga if rank in A else gb), sorted(mine)


def scenario_two_groups_concurrently(rank, world, use_torch_groups=False, calls=24):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    group, members = _groups(rank, use_torch_groups)
    me = members.index(rank)
    gw = len(members)
    n = 1031  # prime
    f32, i32, i64 = F.dtype("float32"), F.dtype("int32"), F.dtype("int64")
    buf = symm.empty(n, dtype=f32)
    gathered = symm.empty(gw * n, dtype=f32)
    rs_in = symm.empty(gw * n, dtype=i32)
    recv = symm.empty(gw * (n + 3), dtype=i64)
    world_word = symm.empty(1, dtype=i64)
    m, k, cols = 6, 8, 5
    gather_out = symm.empty((gw * m, k), dtype=f32)
    sig = symm.empty(gw * 2, dtype=i32)
    symm_t = symm.empty((gw * m, cols), dtype=f32)
    sig2 = symm.empty(gw, dtype=i64)
    send_sym = [symm.empty(n + 3 * q, dtype=i64) for q in range(gw)]  # empty() is collective over the job
    F.fill(sig, 0)
    F.fill(sig2, 0)
    symm.barrier()
    handle = symm.rendezvous(buf, group=group)
    assert handle.rank == me and handle.world_size == gw
    for call in range(calls):
        if rank in A:
            # all-reduce: members' values combined in group order
            ins = [_data("float32", n, seed_of("g-ar", call, p)) for p in members]
            F.assign(buf, ins[me])
            symm.shmem_allreduce(buf, "sum", algorithm=("one_shot", "two_shot", None)[call % 3], group=group)
            want = F.values(ins[0]).astype(np.float32) + F.values(ins[1]).astype(np.float32)
            assert np.array_equal(F.values(buf).astype(np.float32), want), f"group allreduce call {call}"
            # allgather in group order
            F.fill(gathered, poison("float32"))
            mine = _data("float32", n, seed_of("g-ag", call, rank))
            symm.shmem_allgather(gathered, mine, mode="pull" if call % 2 else "push", group=group)
            want = np.concatenate([F.values(_data("float32", n, seed_of("g-ag", call, p))) for p in members])
            assert np.array_equal(F.values(gathered), want), f"group allgather call {call}"
            # reduce-scatter (max) into this rank's block
            rs = [_data("int32", gw * n, seed_of("g-rs", call, p)) for p in members]
            F.assign(rs_in, rs[me])
            out = F.full(n, poison("int32"), "int32")
            symm.shmem_reduce_scatter(out, rs_in, "max", group=group)
            want = np.maximum(F.values(rs[0]), F.values(rs[1]))[me * n : (me + 1) * n]
            assert np.array_equal(F.values(out), want), f"group reduce_scatter call {call}"
        else:
            # alltoall with uneven pieces: group rank q receives n + 3q elements from everyone
            sends = [_data("int64", n + 3 * q, seed_of("g-a2a", call, rank, q)) for q in range(gw)]
            F.fill(recv, poison("int64"))
            counts = [n + 3 * me] * gw
            if call % 2 == 0:
                symm.shmem_alltoall(sends, recv, counts, mode="push", group=group)
            else:  # pull reads the senders' tensors in place: they must be symmetric
                for q in range(gw):
                    F.assign(send_sym[q], sends[q])
                symm.shmem_alltoall(send_sym, recv, counts, mode="pull", group=group)
            want = np.concatenate(
                [F.values(_data("int64", n + 3 * me, seed_of("g-a2a", call, p, me))) for p in members]
            )
            assert np.array_equal(F.values(recv)[: want.size], want), f"group alltoall call {call}"
            # broadcast from group rank call % 2
            root = call % 2
            F.assign(buf, _data("float32", n, seed_of("g-bc", call, rank)))
            symm.shmem_broadcast(buf, root, group=group)
            want = F.values(_data("float32", n, seed_of("g-bc", call, members[root])))
            assert np.array_equal(F.values(buf), want), f"group broadcast call {call}"
            # the fused ops over the group
            bmat = _data("float32", (k, cols), seed_of("g-b", call))
            a = _data("float32", (m, k), seed_of("g-a", call, rank))
            _, c = symm.fused_all_gather_matmul(
                a,
                bmat,
                None,
                gather_out,
                sig,
                3,
                mode="pull" if call % 2 else "push",
                overlap=call % 4 == 1,
                group=group,
            )
            full = np.concatenate([F.values(_data("float32", (m, k), seed_of("g-a", call, p))) for p in members])
            got = F.values(c)
            assert np.abs(got - full @ F.values(bmat)).max() <= 1e-3 * (np.abs(full @ F.values(bmat)).max() + 1), (
                f"group fused_all_gather_matmul call {call}"
            )
            x1 = _data("float32", (gw * m, k), seed_of("g-x1", call, rank))
            out = symm.fused_matmul_reduce_scatter(
                x1, bmat, symm_t, sig2, "sum", mode="pull" if call % 3 else "push", group=group
            )
            want = sum(F.values(_data("float32", (gw * m, k), seed_of("g-x1", call, p))) for p in members) @ F.values(
                bmat
            )
            want = want[me * m : (me + 1) * m]
            assert np.abs(F.values(out) - want).max() <= 1e-3 * (np.abs(want).max() + 1), (
                f"group fused_matmul_reduce_scatter call {call}"
            )
        if call % 8 == 7:  # the whole job in between, on its own epochs
            F.fill(world_word, rank + 1)
            symm.shmem_allreduce(world_word, "sum")
            assert int(F.values(world_word)[0]) == world * (world + 1) // 2
            symm.barrier(group=group)
    # Peer views through the group handle: group rank p's copy is rank members[p]'s.
    F.fill(buf, float(rank))
    handle.barrier()
    for p in range(gw):
        if handle.buffer_ptrs[p] is not None:
            view = handle.get_buffer(p, (1,), f32)
            assert float(F.values(view)[0]) == float(members[p]), f"group rendezvous view of group rank {p}"
    handle.barrier()
    teams = symm.debug_state()["teams"]
    assert teams[0]["ranks"] == list(range(world)), teams
    assert any(t["ranks"] == list(members) and t["calls"] > calls for t in teams), teams
    symm.barrier()
    symm.finalize()


def scenario_group_errors(rank, world):
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    buf = symm.empty(8, dtype=F.dtype("int64"))
    out = symm.empty(16, dtype=F.dtype("int64"))
    F.fill(buf, rank + 10)
    F.fill(out, -1)
    symm.barrier()
    other = (rank + 1) % world
    bad = [
        ([other], symm.ShmemValueError, "not a member"),
        ([rank, rank], symm.ShmemValueError, "twice"),
        ([rank, world], symm.ShmemValueError, "group[1]"),
        ([], symm.ShmemValueError, "no ranks"),
        (3.5, symm.ShmemTypeError, "group"),
    ]
    for group, exc, words in bad:
        for call in (
            lambda: symm.shmem_allreduce(buf, group=group),
            lambda: symm.shmem_allgather(out, buf, group=group),
            lambda: symm.shmem_broadcast(buf, 0, group=group),
            lambda: symm.barrier(group=group),
            lambda: symm.rendezvous(buf, group=group),
        ):
            with pytest.raises(exc) as ei:
                call()
            assert words in str(ei.value), str(ei.value)
    if os.environ.get("HP_TEST_FRAMEWORK") == "mindspore":
        # MindSpore's world group is the whole job; a named group needs MindSpore's communication
        # package to list its ranks (not initialized in these jobs): a clear error, nothing written.
        symm.shmem_allreduce(buf, group="hccl_world_group")
        assert np.all(F.values(buf) == sum(r + 10 for r in range(world)))
        F.fill(buf, rank + 10)
        with pytest.raises(symm.ShmemValueError, match="cannot list its ranks"):
            symm.shmem_allreduce(buf, group="tp_group")
        assert np.all(F.values(buf) == rank + 10)
    else:
        import torch.distributed as dist

        sub = dist.new_group([0, 1])  # collective over the job; rank 2 gets a non-member marker
        if rank == 2:
            with pytest.raises(symm.ShmemValueError, match="not a member"):
                symm.shmem_allreduce(buf, group=sub)
        assert symm.rendezvous(buf, group=dist.group.WORLD).world_size == world
    pair = [0, 1]
    if rank in pair:
        # sizes are the group's: 2 x 8 elements gathered, roots and peers in [0, 2)
        with pytest.raises(symm.ShmemValueError, match="2 x 8 = 16"):
            symm.shmem_allgather(buf, buf, group=pair)
        with pytest.raises(symm.ShmemValueError, match="root"):
            symm.shmem_broadcast(buf, 2, group=pair)
        with pytest.raises(symm.ShmemValueError, match="peer"):
            symm.rendezvous(buf, group=pair).get_buffer(2, (1,))
        assert np.all(F.values(buf) == rank + 10) and np.all(F.values(out) == -1), "a refused call wrote"
        symm.shmem_allgather(out, buf, group=pair)
        assert list(F.values(out)) == [10] * 8 + [11] * 8
        # Collectives of two groups entered in opposite orders would wait for each other for
        # good: both ranks raise (long before the 30 s timeout), nothing written.
        symm.barrier(group=[1, 0])
        t0 = time.monotonic()
        with pytest.raises(symm.CollectiveMismatchError, match="different orders"):
            symm.shmem_allreduce(buf, group=[0, 1] if rank == 0 else [1, 0])
        assert time.monotonic() - t0 < 5, "found by the wait notes, not by the timeout"
        assert np.all(F.values(buf) == rank + 10), "a deadlocked call wrote"
    if rank in (0, 2):
        # Members that list a new group in different orders both fail, and nothing is written.
        with pytest.raises(symm.CollectiveMismatchError, match="different"):
            symm.shmem_allreduce(buf, group=[0, 2] if rank == 0 else [2, 0])
        assert np.all(F.values(buf) == rank + 10), "a mismatched call wrote"
        symm.shmem_allreduce(buf, group=[0, 2])
        assert np.all(F.values(buf) == 22)
    symm.barrier()
    symm.finalize()


def scenario_killed_member(rank, world):
    """Rank 1 of group [0, 1] dies: rank 0's group calls fail with PeerDeadError naming it within
    5 s; group [2, 3] goes on calling its own collectives well past the death."""
    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    group = [0, 1] if rank < 2 else [2, 3]
    buf = symm.empty(64, dtype=F.dtype("int64"))
    symm.shmem_allreduce(buf, group=group)  # the group exists everywhere before anyone dies
    symm.barrier()
    if rank == 1:
        time.sleep(0.3)
        os.kill(os.getpid(), _signal.SIGKILL)
    t0 = time.monotonic()
    if rank == 0:
        with pytest.raises(symm.PeerDeadError) as ei:
            while True:
                symm.shmem_allreduce(buf, group=group)
        assert "rank(s) 1 " in str(ei.value), str(ei.value)
        assert time.monotonic() - t0 < 5.5
    else:
        call = 0
        while True:  # both members decide alike when to stop: the last element is the vote
            F.fill(buf, rank * 10 + call)
            F.assign(buf[63:], F.tensor([1 if time.monotonic() - t0 < 2.5 else 0], "int64"))
            symm.shmem_allreduce(buf, group=group)
            v = F.values(buf)
            assert np.all(v[:63] == 50 + 2 * call), f"call {call}"
            call += 1
            if v[63] != 2:
                break
        symm.barrier(group=group)
        with pytest.raises(symm.PeerDeadError):
            symm.barrier()  # the whole job's barrier does depend on rank 1
    os._exit(0)  # skip finalize and the framework's teardown: the job is broken


@pytest.mark.parametrize("use_torch_groups", [False, True])
def test_two_groups_run_different_collectives_concurrently(fw, use_torch_groups):
    if use_torch_groups and fw != "torch":
        pytest.skip("torch ProcessGroups")
    assert_job_ok(
        HERE,
        "scenario_two_groups_concurrently",
        4,
        framework=fw,
        kwargs={"use_torch_groups": use_torch_groups},
        timeout=300,
    )


def test_bad_groups_raise_and_write_nothing(fw):
    assert_job_ok(HERE, "scenario_group_errors", 3, framework=fw)


def test_killed_member_fails_its_group_only(fw):
    res = run_job(HERE, "scenario_killed_member", 4, framework=fw, timeout=120)
    assert not res.timed_out, res.describe()
    assert res.codes[1] == -_signal.SIGKILL and [res.codes[i] for i in (0, 2, 3)] == [0, 0, 0], res.describe()


def test_two_groups_across_hosts():
    """Both groups span two simulated hosts (ranks 0, 1 on one; 2, 3 on the other; UCX between)."""
    assert_job_ok(HERE, "scenario_two_groups_concurrently", 4, layout="hosts", kwargs={"calls": 8}, timeout=300)
