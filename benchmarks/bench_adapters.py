"""What the framework adapter costs: the same calls through the torch and the MindSpore handler.

    python benchmarks/bench_adapters.py [--quick] [--repeat 2] [--out bench-results/adapters.json]

Two jobs of 2 ranks each, one per framework, alternated --repeat times with identical code
(each figure is the best of its repeats, so drift of the host's memory bandwidth between jobs
does not decide a comparison)
(the ranks bootstrap through an explicit endpoint, so no framework process group is
involved): 8-byte shmem_put, shmem_signal_op and put_with_signal one-way latency;
shmem_allgather and shmem_alltoall from 8 B to 16 MiB per rank; fused_all_gather_matmul
and fused_matmul_reduce_scatter on the RFC's shapes in float32. The runtime underneath is the
same, so the difference is the adapter (describing tensors, MindSpore's queue drain) and,
for the fused ops, the framework's own matmul. Prints a table, writes JSON; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

SIZES = [8, 4096, 262144, 1 << 20, 1 << 24]
QUICK_SIZES = [8, 4096, 1 << 20]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Fw:
    """Just enough of each framework to make inputs from NumPy."""

    def __init__(self, name):
        self.name = name
        if name == "torch":
            import torch

            torch.set_num_threads(1)
            self.mod = torch
        else:
            import mindspore

            # One kernel thread per rank, as torch above: the ranks already fill the cores.
            mindspore.device_context.cpu.op_tuning.threads_num(1)
            self.mod = mindspore

    def dtype(self, name):
        return getattr(self.mod, name)

    def tensor(self, arr):
        return self.mod.from_numpy(arr.copy()) if self.name == "torch" else self.mod.Tensor(arr)

    def matmul(self, a, b):
        """a @ b, finished when this returns."""
        if self.name == "torch":
            return self.mod.matmul(a, b)
        out = self.mod.ops.matmul(a, b)
        out.asnumpy()
        return out

    def zero(self, t):
        if self.name == "torch":
            t.zero_()
        else:
            t[:] = 0


def _median(fn, barrier, calls, batches):
    fn()
    samples = []
    for _ in range(batches):
        barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls)
    return statistics.median(samples)


def _calls_for(nbytes):
    """The same call counts on every rank (no broadcast needed): ~10 ms batches."""
    return max(1, min(500, int(2e7 / max(nbytes, 4096) / 8)))


def worker(fw_name, quick, out):
    import numpy as np

    import hyper_parallel.core.symmetric_memory as symm

    F = _Fw(fw_name)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    peer = (rank + 1) % world
    batches = 7 if quick else 25
    rows = []
    i64 = F.dtype("int64")

    # ---- primitives, on rank 0 alone (rank 1 only answers the ping-pong)
    buf = symm.empty(1, dtype=i64)
    sig = symm.empty(2, dtype=i64)
    F.zero(sig)
    src = F.tensor(np.ones(1, np.int64))
    symm.barrier()
    if rank == 0:
        noop = lambda: None  # noqa: E731
        rows.append(("shmem_put", 8, _median(lambda: symm.shmem_put(buf, 0, src, 0, 1, 1), noop, 500, batches)))
        rows.append(("shmem_signal_op", 8, _median(lambda: symm.shmem_signal_op(buf, 0, 1, 1, 1), noop, 500, batches)))
    symm.barrier()
    k = [0]

    def ping():
        k[0] += 1
        if rank == 0:
            symm.shmem_put_with_signal(buf, 0, src, 0, 1, sig, 0, k[0], 0, peer)
            symm.shmem_wait_for_signal(None, sig, 1, k[0], 0)
        else:
            symm.shmem_wait_for_signal(None, sig, 0, k[0], 0)
            symm.shmem_put_with_signal(buf, 0, src, 0, 1, sig, 1, k[0], 0, peer)

    rows.append(("put_with_signal one-way", 8, _median(ping, symm.barrier, 200, batches) / 2))

    # ---- collectives
    f32 = F.dtype("float32")
    for nbytes in QUICK_SIZES if quick else SIZES:
        n = max(1, nbytes // 4)
        x = F.tensor(np.full(n, rank, np.float32))
        out_t = symm.empty(world * n, dtype=f32)
        calls = _calls_for(nbytes * world)
        rows.append(
            ("shmem_allgather", nbytes, _median(lambda: symm.shmem_allgather(out_t, x), symm.barrier, calls, batches))
        )
        sends = [F.tensor(np.full(n // world if n >= world else 1, p, np.float32)) for p in range(world)]
        piece = n // world if n >= world else 1
        recv = symm.empty(world * piece, dtype=f32)
        rows.append(
            (
                "shmem_alltoall",
                nbytes,
                _median(lambda: symm.shmem_alltoall(sends, recv, [piece] * world), symm.barrier, calls, batches),
            )
        )
        symm.free(recv)
        symm.free(out_t)

    # ---- fused ops, the RFC's shapes
    m, kk, nn = (256, 512, 1024) if quick else (512, 1024, 2048)
    g = np.random.default_rng(rank)
    a = F.tensor(g.standard_normal((m, kk)).astype(np.float32))
    b = F.tensor(g.standard_normal((kk, nn)).astype(np.float32))
    gather_out = symm.empty((world * m, kk), dtype=f32)
    s1 = symm.empty(world, dtype=F.dtype("int32"))
    F.zero(s1)
    x1 = F.tensor(g.standard_normal((m, kk)).astype(np.float32))
    g = np.random.default_rng(rank + 7)
    symm_t = symm.empty((m, nn), dtype=f32)
    s2 = symm.empty(world, dtype=F.dtype("int32"))
    F.zero(s2)
    symm.barrier()
    fb = max(3, batches // 3)
    # The framework's own matmuls of the same shapes: what the fused ops cannot do faster.
    full_a = F.tensor(g.standard_normal((world * m, kk)).astype(np.float32))
    rows.append(("matmul (W*m x k x n)", m * kk * 4, _median(lambda: F.matmul(full_a, b), symm.barrier, 2, fb)))
    rows.append(("matmul (m x k x n)", m * nn * 4, _median(lambda: F.matmul(x1, b), symm.barrier, 2, fb)))
    rows.append(
        (
            "fused_all_gather_matmul",
            m * kk * 4,
            _median(lambda: symm.fused_all_gather_matmul(a, b, None, gather_out, s1, m), symm.barrier, 2, fb),
        )
    )
    rows.append(
        (
            "fused_matmul_reduce_scatter",
            m * nn * 4,
            _median(lambda: symm.fused_matmul_reduce_scatter(x1, b, symm_t, s2, "sum"), symm.barrier, 2, fb),
        )
    )
    symm.barrier()
    symm.finalize()
    if rank == 0:
        with open(out, "w") as f:
            json.dump([{"op": op, "bytes": nb, "us": round(sec * 1e6, 3)} for op, nb, sec in rows], f)


def _run_job(fw, quick, tmp):
    port = _free_port()
    out = os.path.join(tmp, f"{fw}.json")
    env = dict(
        os.environ,
        HYPER_PARALLEL_PLATFORM=fw,
        OMP_NUM_THREADS="1",
        GLOG_v="3",
        SYMMETRIC_MEMORY_HEAP_SIZE="512m",
        HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT=f"tcp://127.0.0.1:{port}",
        HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET=os.urandom(16).hex(),
    )
    code = (
        f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
        f"import bench_adapters as b; b.worker({fw!r}, {quick!r}, {out!r})"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=dict(env, RANK=str(r), WORLD_SIZE="2")) for r in range(2)
    ]
    codes = [p.wait(timeout=1800) for p in procs]
    if any(codes):
        raise SystemExit(f"{fw} job failed: exit codes {codes}")
    return json.load(open(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-results/adapters.json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    import tempfile

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for fw in ("torch", "mindspore"):
                rows = _run_job(fw, args.quick, tmp)
                best = results.setdefault(fw, rows)
                for b, r in zip(best, rows):
                    b["us"] = min(b["us"], r["us"])
    recs = []
    print(f"{'op':30s} {'bytes/rank':>11s} {'torch us':>10s} {'mindspore us':>13s} {'ms/torch':>9s}")
    for t_row, m_row in zip(results["torch"], results["mindspore"]):
        ratio = m_row["us"] / t_row["us"]
        print(f"{t_row['op']:30s} {t_row['bytes']:>11d} {t_row['us']:10.2f} {m_row['us']:13.2f} {ratio:9.2f}")
        recs.append(
            {
                "op": t_row["op"],
                "bytes": t_row["bytes"],
                "ranks": 2,
                "torch_us": t_row["us"],
                "mindspore_us": m_row["us"],
                "mindspore_over_torch": round(ratio, 3),
            }
        )
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"benchmark": "adapters", "repeat": args.repeat, "records": recs}, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
