"""Soak: many rounds of mixed calls in one job, every result checked, resources watched.

Not part of ``make test`` (minutes, not seconds): ``make soak`` runs 10^5 rounds on 2 and 4
ranks for each framework, prints a table and writes ``bench-results/soak.json``. A round is
one of: a put-with-signal to the right neighbour under credit flow control (the receiver
acks each message after checking it), an allgather or alltoall of a random size, a get of
a peer's known buffer, a barrier, an allocation freed again (sometimes with a view kept
past the free). Every rank samples its RSS, open file descriptors and threads along the
way; the job fails if a result is wrong, if fds or threads grow, or if RSS keeps growing.

    python3 tests/python/soak.py [--rounds N] [--worlds 2 4] [--frameworks torch mindspore]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import numpy as np

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))

MAX_BYTES = 16 * 1024  # per rank, per call
RSS_SLACK_MB = 32  # growth allowed after warm-up (allocator caches, lazy pools)


def _resources():
    with open("/proc/self/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    return rss, len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task"))


def _pattern(seed: int, n: int) -> np.ndarray:
    return ((np.arange(n, dtype=np.int64) * 131 + seed * 7919) % 251).astype(np.uint8)


def soak_rank(rank, world, rounds=100000, seed=1):
    from frameworks import current

    import hyper_parallel.core.symmetric_memory as symm

    F = current()
    u8, i64 = F.dtype("uint8"), F.dtype("int64")
    rng = random.Random(seed)  # the same draws on every rank: collective kinds agree
    right, left = (rank + 1) % world, (rank - 1) % world
    ring = symm.empty(MAX_BYTES, dtype=u8)
    sig = symm.empty(2, dtype=i64)  # [0]: messages arrived from the left, [1]: acks from the right
    F.fill(sig, 0)
    static = symm.empty(MAX_BYTES, dtype=u8)
    F.assign(static, F.tensor(_pattern(rank, MAX_BYTES), "uint8"))
    gather = symm.empty(world * MAX_BYTES, dtype=u8)
    a2a_out = symm.empty(world * MAX_BYTES, dtype=u8)
    symm.barrier()
    live0 = symm.debug_state()["heap"]["bytes_live"]
    sent = received = 0
    samples, kinds = [], {}
    warm = max(1, rounds // 10)
    t0 = time.monotonic()
    for i in range(rounds):
        kind = rng.choice(("ring", "ring", "allgather", "alltoall", "get", "barrier", "alloc"))
        n = rng.randint(0, MAX_BYTES)
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "ring":
            if world == 1:
                continue
            # Credit: the right neighbour has checked (and acked) every earlier message.
            symm.shmem_wait_for_signal(None, sig, 1, sent, "ge")
            data = F.tensor(_pattern(i * 1000 + rank, n), "uint8")
            symm.shmem_put_with_signal(ring, 0, data, 0, n, sig, 0, 1, "add", right)
            sent += 1
            received += 1
            symm.shmem_wait_for_signal(None, sig, 0, received, "ge")
            got = F.bits(ring)[:n]
            want = _pattern(i * 1000 + left, n)
            assert np.array_equal(got, want), f"round {i}: ring message from rank {left} differs"
            symm.shmem_signal_op(sig, 1, 1, "add", left)
        elif kind == "allgather":
            F.fill(gather, 0)
            symm.shmem_allgather(gather[: world * n], F.tensor(_pattern(i + rank, n), "uint8"))
            got = F.bits(gather)
            for p in range(world):
                assert np.array_equal(got[p * n : (p + 1) * n], _pattern(i + p, n)), f"round {i}: allgather from {p}"
        elif kind == "alltoall":
            per = n // world
            sends = [F.tensor(_pattern(i * 31 + rank * world + p, per), "uint8") for p in range(world)]
            symm.shmem_alltoall(sends, a2a_out[: world * per], [per] * world)
            got = F.bits(a2a_out)
            for p in range(world):
                assert np.array_equal(got[p * per : (p + 1) * per], _pattern(i * 31 + p * world + rank, per)), (
                    f"round {i}: alltoall from {p}"
                )
        elif kind == "get":
            p = rng.randrange(world)
            off = rng.randrange(MAX_BYTES - n + 1)
            dst = F.full(n, 0, "uint8")
            symm.shmem_get(dst, 0, static, off, n, p)
            assert np.array_equal(F.bits(dst), _pattern(p, MAX_BYTES)[off : off + n]), f"round {i}: get from {p}"
        elif kind == "barrier":
            symm.barrier()
        else:
            t = symm.empty(n + 1, dtype=u8)
            view = t[1:] if rng.random() < 0.3 else None
            symm.free(t)
            del view
        if i % 1000 == 0 or i == rounds - 1:
            samples.append((i,) + _resources())
    seconds = time.monotonic() - t0
    # Freed blocks become reusable at the next allocator call once no view of them is left.
    spare = symm.empty(1, dtype=u8)
    symm.free(spare)
    spare = symm.empty(1, dtype=u8)
    live = symm.debug_state()["heap"]
    symm.free(spare)
    assert live["bytes_live"] == live0 + 64, f"heap bytes live {live0} -> {live['bytes_live']}"
    assert live["freed_pending"] == 0, live
    after = [s for s in samples if s[0] >= warm] or samples
    rss = [s[1] for s in after]
    stats = {
        "rank": rank,
        "rounds": rounds,
        "seconds": round(seconds, 2),
        "kinds": kinds,
        "rss_mb_after_warmup": round(rss[0], 1),
        "rss_mb_end": round(rss[-1], 1),
        "rss_mb_max": round(max(rss), 1),
        "fds": [after[0][2], after[-1][2]],
        "threads": [after[0][3], after[-1][3]],
    }
    print("SOAK " + json.dumps(stats), flush=True)
    assert after[-1][2] <= after[0][2], f"file descriptors grew: {after[0][2]} -> {after[-1][2]}"
    assert after[-1][3] <= after[0][3], f"threads grew: {after[0][3]} -> {after[-1][3]}"
    assert rss[-1] - rss[0] <= RSS_SLACK_MB, f"RSS grew by {rss[-1] - rss[0]:.1f} MB after warm-up"
    symm.finalize()


def main():
    from launcher import leftovers, run_job

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=100000)
    ap.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--frameworks", nargs="+", default=["torch", "mindspore"])
    ap.add_argument("--out", default="bench-results/soak.json")
    args = ap.parse_args()
    before = leftovers()
    results, ok = [], True
    print(
        f"{'framework':<10} {'ranks':>5} {'rounds':>7} {'s':>7} {'rounds/s':>9} {'RSS MB warm->end (max)':>24} "
        f"{'fds':>9} {'threads':>9}  result"
    )
    for fw in args.frameworks:
        for world in args.worlds:
            res = run_job(
                HERE,
                "soak_rank",
                world,
                framework=fw,
                timeout=60 + args.rounds * 0.05,
                kwargs={"rounds": args.rounds},
                env={"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": "120"},
            )
            ranks = [
                json.loads(line[5:]) for out in res.outputs for line in out.splitlines() if line.startswith("SOAK ")
            ]
            passed = not res.timed_out and all(c == 0 for c in res.codes) and len(ranks) == world
            ok &= passed
            results.append({"framework": fw, "world": world, "passed": passed, "ranks": ranks})
            for s in ranks:
                print(
                    f"{fw:<10} {world:>5} {s['rounds']:>7} {s['seconds']:>7.1f} {s['rounds'] / s['seconds']:>9.0f} "
                    f"{s['rss_mb_after_warmup']:>10.1f} -> {s['rss_mb_end']:.1f} ({s['rss_mb_max']:.1f}) "
                    f"{s['fds'][0]:>4}->{s['fds'][1]:<4} {s['threads'][0]:>4}->{s['threads'][1]:<4} "
                    f"{'ok' if passed else 'FAILED'} (rank {s['rank']})"
                )
            if not passed:
                print(res.describe())
    left = sorted(set(leftovers()) - set(before))
    if left:
        ok = False
        print("left behind:", left)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"rounds": args.rounds, "results": results, "left_behind": left}, f, indent=1)
    print(f"wrote {args.out}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
