"""The torch.distributed backend "hpshmem" beside gloo (and Open MPI's Allreduce through mpi4py), in one run.

    python benchmarks/bench_backend.py [--ranks 2,4] [--quick] [--repeat 2] [--out bench-results/backend.json]

Plain ``dist.*`` calls on ordinary CPU tensors (the staging copies included), float32, 8 B to 64 MiB,
on 2 and 4 ranks of this host: all_reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor,
all_to_all_single, and barrier; then the step time of DDP on a communication-heavy MLP (4.2 M
parameters, batch 4), of FSDP2 on a small transformer and of a tensor-parallel MLP, each under both
backends. The jobs alternate --repeat times and every figure keeps its best median (rank 0's view).
Also splits one 8-byte all_reduce into torch's dispatch, our front end and the collective itself.
Writes JSON and a PNG plot, prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_collectives import _median_time, _run_mpi  # noqa: E402  (the shared timing and mpirun)

SIZES = [8, 64, 512, 4096, 32768, 262144, 1 << 20, 1 << 22, 1 << 24, 1 << 26]
QUICK_SIZES = [8, 4096, 262144, 1 << 22]
OPS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all")


def _worker(rank, world, port, backend, sizes, quick, result_file):
    import torch
    import torch.distributed as dist

    import hyper_parallel  # noqa: F401  (registers hpshmem; torch's entry point does too)

    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    budget = 0.15 if quick else 0.4
    recs = []

    def bcast(per, batches):
        t = torch.tensor([per, batches])
        dist.broadcast(t, 0)
        return int(t[0]), int(t[1])

    def rec(op, nbytes, sec, **extra):
        if rank == 0:
            recs.append(dict(op=op, impl=backend, ranks=world, bytes=nbytes, median_us=round(sec * 1e6, 3), **extra))
            print(f"{world} ranks {op:16s} {backend:8s} {nbytes:>10d} B {sec * 1e6:12.1f} us", flush=True)

    rec("barrier", 0, _median_time(dist.barrier, dist.barrier, budget, bcast))
    for nbytes in sizes:
        n = max(world, nbytes // 4 // world * world)
        x, out, big = torch.randn(n), torch.empty(n), torch.randn(n * world)
        gathered, piece = torch.empty(n * world), torch.empty(n // world)
        calls = {
            "all_reduce": lambda: dist.all_reduce(x),
            "broadcast": lambda: dist.broadcast(x, 0),
            "all_gather": lambda: dist.all_gather_into_tensor(gathered, x),
            "reduce_scatter": lambda: dist.reduce_scatter_tensor(piece, x),
            "all_to_all": lambda: dist.all_to_all_single(out, x),
        }
        for op in OPS:
            rec(op, nbytes, _median_time(calls[op], dist.barrier, budget, bcast))
        del big
    if backend == "hpshmem":
        # Where an 8-byte all_reduce goes: the collective alone, our process group, torch's dist call.
        from hyper_parallel import _hpshmem as _C

        pg = dist.group.WORLD
        x = torch.zeros(2)
        a = x.data_ptr()
        opts = dist.AllreduceOptions()
        opts.asyncOp = False
        rec(
            "split: collective",
            8,
            _median_time(lambda: _C.allreduce(pg._stage_addr, 2, 0, 0, 0, 0, a, a), dist.barrier, budget, bcast),
        )
        rec("split: process group", 8, _median_time(lambda: pg.allreduce([x], opts), dist.barrier, budget, bcast))
        rec("split: dist.all_reduce", 8, _median_time(lambda: dist.all_reduce(x), dist.barrier, budget, bcast))
    _models(rank, world, rec, quick)
    if rank == 0:
        with open(result_file, "w") as f:
            json.dump(recs, f)
    dist.destroy_process_group()


def _step_time(step, steps):
    import torch.distributed as dist

    step()  # warm-up
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    return (time.perf_counter() - t0) / steps


def _models(rank, world, rec, quick):
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from torch.nn.parallel import DistributedDataParallel as DDP

    steps = 5 if quick else 20
    torch.manual_seed(0)
    width = 1024
    mlp = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(width, width), torch.nn.ReLU())])
    ddp = DDP(mlp)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(4, width)

    def ddp_step():
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()

    rec("ddp step (4.2M params, batch 4)", 0, _step_time(ddp_step, steps))

    mesh = init_device_mesh("cpu", (world,))
    layer = torch.nn.TransformerEncoderLayer(256, 4, 512, dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(layer, torch.nn.TransformerEncoderLayer(256, 4, 512, dropout=0.0, batch_first=True))
    for blk in model:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    fopt = torch.optim.Adam(model.parameters(), lr=1e-4)
    tokens = torch.randn(2, 16, 256)

    def fsdp_step():
        fopt.zero_grad()
        model(tokens).square().mean().backward()
        fopt.step()

    rec("fsdp2 step (2-layer transformer, d=256)", 0, _step_time(fsdp_step, steps))

    tp = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512))
    parallelize_module(tp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    topt = torch.optim.SGD(tp.parameters(), lr=1e-3)
    tx = torch.randn(8, 512)

    def tp_step():
        topt.zero_grad()
        tp(tx).square().mean().backward()
        topt.step()

    rec("tp step (MLP 512-2048-512)", 0, _step_time(tp_step, steps))


def _job(world, backend, sizes, quick, tmp):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = os.path.join(tmp, f"{backend}-{world}.json")
    code = (
        "import sys; sys.path.insert(0, %r); import bench_backend as b; "
        "b._worker(int(sys.argv[1]), %d, %d, %r, %r, %r, %r)"
    ) % (os.path.dirname(os.path.abspath(__file__)), world, port, backend, sizes, quick, out)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(r)], env=env) for r in range(world)]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"{backend} job on {world} ranks failed")
    return json.load(open(out))


def _plot(recs, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    worlds = sorted({r["ranks"] for r in recs})
    fig, axes = plt.subplots(len(worlds), len(OPS), figsize=(4 * len(OPS), 3.5 * len(worlds)), squeeze=False)
    for i, w in enumerate(worlds):
        for j, op in enumerate(OPS):
            ax = axes[i][j]
            for impl in sorted({r["impl"] for r in recs if r["op"] == op}):
                pts = sorted(
                    (r["bytes"], r["median_us"])
                    for r in recs
                    if r["ranks"] == w and r["op"] == op and r["impl"] == impl
                )
                if pts:
                    ax.loglog([p[0] for p in pts], [p[1] for p in pts], marker="o", label=impl)
            ax.set_title(f"{op}, {w} ranks")
            ax.set_xlabel("bytes")
            ax.set_ylabel("µs")
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", default="bench-results/backend.json")
    args = ap.parse_args()
    sizes = QUICK_SIZES if args.quick else SIZES
    best = {}
    with tempfile.TemporaryDirectory() as tmp:
        for w in [int(x) for x in args.ranks.split(",")]:
            for _ in range(args.repeat):
                for backend in ("hpshmem", "gloo"):
                    for r in _job(w, backend, sizes, args.quick, tmp):
                        key = (r["op"], r["impl"], r["ranks"], r["bytes"])
                        if key not in best or r["median_us"] < best[key]["median_us"]:
                            best[key] = r
            try:
                for r in _run_mpi(
                    w,
                    sizes,
                    args.quick,
                    tmp,
                    script=os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_allreduce.py"),
                ):
                    r["op"] = "all_reduce"
                    best[(r["op"], r["impl"], r["ranks"], r["bytes"])] = r
            except Exception as e:  # noqa: BLE001 (the peer is optional)
                print(f"Open MPI rows skipped: {e}")
    recs = sorted(best.values(), key=lambda r: (r["ranks"], r["op"], r["bytes"], r["impl"]))
    print(f"\n{'ranks':>5} {'op':40s} {'bytes':>10} {'hpshmem us':>11} {'gloo us':>10} {'Open MPI':>9} {'x gloo':>7}")
    for w in sorted({r["ranks"] for r in recs}):
        keys = sorted({(r["op"], r["bytes"]) for r in recs if r["ranks"] == w})
        for op, b in keys:
            get = {r["impl"]: r["median_us"] for r in recs if r["ranks"] == w and r["op"] == op and r["bytes"] == b}
            ours, gloo = get.get("hpshmem"), get.get("gloo")
            mpi = get.get("Open MPI")
            ratio = f"{gloo / ours:7.1f}" if ours and gloo else ""
            print(f"{w:>5} {op:40s} {b:>10} {ours or '':>11} {gloo or '':>10} {mpi or '':>9} {ratio}")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(recs, f, indent=1)
    _plot(recs, os.path.splitext(args.out)[0] + ".png")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
