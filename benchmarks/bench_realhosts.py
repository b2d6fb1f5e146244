"""Two real hosts made on this machine, beside Open MPI and UCX's own ceiling on the same wire, in one run.

    python benchmarks/bench_realhosts.py [--out bench-results/realhosts.json] [--quick] [--repeat 2]

Needs root: the hosts are two network namespaces joined by a veth pair (198.18.0.0/15 only), each
node in its own IPC and mount namespace with a private /dev/shm (tests/python/realhosts.py), so
that nothing but the network joins them. Everything made is removed afterwards.

For 1 and 2 ranks per node (2 and 4 ranks), alternating `--repeat` times and keeping each figure's
best median:
  * ours: the Python API under torchrun (--nnodes 2), UCX over TCP on the veth between the nodes,
    shared memory within a node: put-with-signal one way (half a ping-pong between rank 0 and the
    first rank of the other node), barrier, allgather, alltoall, allreduce, reduce-scatter and
    broadcast;
  * Open MPI: the same calls through mpi4py under one mpirun spanning both nodes (its remote
    launcher enters node B's namespaces), pml ob1 over btl tcp; with 2 ranks per node also with
    vader (shared memory) within a node, each figure keeping the faster of the two;
  * the engine: ucx_perftest across the wire, ucp_am_lat (8 B one way) and ucp_am_bw (1 MiB,
    16 MiB), with the same UCX settings as ours.
`--ops` keeps some of them (e.g. `--ops allreduce,barrier`) for a quicker A/B of one change.
Bytes are per rank (alltoall: what one rank sends in all). Prints a table and writes JSON records
{op, impl, ranks, bytes, median_us}; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

SIZES = [8, 512, 4096, 32768, 262144, 1 << 20, 1 << 22, 1 << 24]
QUICK_SIZES = [8, 4096, 262144, 1 << 20, 1 << 22]
OPS = ("allgather", "alltoall", "allreduce", "reduce_scatter", "broadcast")
PINGPONG = (8, 1 << 20)
PORT = 29511
_only = None  # --ops: the ops to time (put_signal_one_way, barrier and those of OPS); None: all


def _wants(op):
    return _only is None or op in _only


def _plan(nbytes, world, quick):
    """(calls per batch, batches) for one size: the same on every rank, so no agreement is needed."""
    calls = max(3, min(300, (16 << 20) // max(1024, nbytes * world)))
    return calls, 3 if quick else 7


def _timed(fn, barrier, calls, batches, me):
    fn()  # warm-up
    samples = []
    for _ in range(batches):
        barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls)
    return statistics.median(samples) if me == 0 else None


# ----------------------------------------------------------------------------- workers
def _ours_worker(out_path, sizes, quick):
    import torch
    import torch.distributed as dist

    import hyper_parallel.core.symmetric_memory as symm

    torch.set_num_threads(1)
    dist.init_process_group("hpshmem")
    me, world = dist.get_rank(), dist.get_world_size()
    peer = world // 2  # the first rank of node B
    recs = []

    def rec(op, nbytes, sec):
        if sec is not None:
            recs.append({"op": op, "impl": "hyper_parallel", "ranks": world, "bytes": nbytes, "median_us": sec * 1e6})

    flag = symm.empty(2, dtype=torch.int64)
    flag.zero_()
    inbox = symm.empty(max(PINGPONG) // 4, dtype=torch.float32)
    symm.barrier()
    seq = [0]
    for nbytes in PINGPONG if _wants("put_signal_one_way") else ():
        n = nbytes // 4
        src = torch.randn(n)
        calls, batches = _plan(nbytes, 2, quick)

        def ping():
            seq[0] += 1
            if me == 0:
                symm.shmem_put_with_signal(inbox, 0, src, 0, n, flag, 0, seq[0], "set", peer)
                symm.shmem_wait_for_signal(None, flag, 1, seq[0], "ge")
            elif me == peer:
                symm.shmem_wait_for_signal(None, flag, 0, seq[0], "ge")
                symm.shmem_put_with_signal(inbox, 0, src, 0, n, flag, 1, seq[0], "set", 0)

        t = _timed(ping, symm.barrier, calls, batches, me)
        rec("put_signal_one_way", nbytes, None if t is None else t / 2)
    if _wants("barrier"):
        rec("barrier", 0, _timed(symm.barrier, symm.barrier, 300, 3 if quick else 7, me))
    for nbytes in sizes:
        n = max(world, nbytes // 4 // world * world)  # a multiple of the ranks, for reduce-scatter
        x = torch.randn(n)
        calls, batches = _plan(nbytes, world, quick)
        out = symm.empty(world * n, dtype=torch.float32)
        per = n // world
        sends = list(x.view(world, per).unbind(0))
        recv = symm.empty(n, dtype=torch.float32)
        buf = symm.empty(n, dtype=torch.float32)
        buf.copy_(x)
        part = symm.empty(per, dtype=torch.float32)
        fns = {
            "allgather": lambda: symm.shmem_allgather(out, x),
            "alltoall": lambda: symm.shmem_alltoall(sends, recv, [per] * world),
            "allreduce": lambda: symm.shmem_allreduce(buf, "sum"),
            "reduce_scatter": lambda: symm.shmem_reduce_scatter(part, buf, "sum"),
            "broadcast": lambda: symm.shmem_broadcast(buf, 0),
        }
        for op in filter(_wants, OPS):
            rec(op, n * 4, _timed(fns[op], symm.barrier, calls, batches, me))
        for t in (out, recv, buf, part):
            symm.free(t)
    symm.barrier()
    if me == 0:
        with open(out_path, "w") as f:
            json.dump(recs, f)
    symm.finalize()
    dist.destroy_process_group()


def _mpi_worker(out_path, sizes, quick):
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    me, world = comm.Get_rank(), comm.Get_size()
    peer = world // 2
    recs = []

    def rec(op, nbytes, sec):
        if sec is not None:
            recs.append({"op": op, "impl": "Open MPI", "ranks": world, "bytes": nbytes, "median_us": sec * 1e6})

    for nbytes in PINGPONG if _wants("put_signal_one_way") else ():
        buf = np.random.rand(nbytes // 4).astype(np.float32)
        calls, batches = _plan(nbytes, 2, quick)

        def ping():
            if me == 0:
                comm.Send(buf, dest=peer)
                comm.Recv(buf, source=peer)
            elif me == peer:
                comm.Recv(buf, source=0)
                comm.Send(buf, dest=0)

        t = _timed(ping, comm.Barrier, calls, batches, me)
        rec("put_signal_one_way", nbytes, None if t is None else t / 2)
    if _wants("barrier"):
        rec("barrier", 0, _timed(comm.Barrier, comm.Barrier, 300, 3 if quick else 7, me))
    for nbytes in sizes:
        n = max(world, nbytes // 4 // world * world)
        x = np.random.rand(n).astype(np.float32)
        calls, batches = _plan(nbytes, world, quick)
        out = np.empty(world * n, np.float32)
        recv = np.empty(n, np.float32)
        buf = x.copy()
        res = np.empty(n, np.float32)
        part = np.empty(n // world, np.float32)
        fns = {
            "allgather": lambda: comm.Allgather(x, out),
            "alltoall": lambda: comm.Alltoall(x, recv),
            "allreduce": lambda: comm.Allreduce(buf, res, MPI.SUM),
            "reduce_scatter": lambda: comm.Reduce_scatter_block(buf, part, MPI.SUM),
            "broadcast": lambda: comm.Bcast(buf, 0),
        }
        for op in filter(_wants, OPS):
            rec(op, n * 4, _timed(fns[op], comm.Barrier, calls, batches, me))
    if me == 0:
        with open(out_path, "w") as f:
            json.dump(recs, f)


# ----------------------------------------------------------------------------- the runs
def _node_env(hosts, node):
    env = {k: v for k, v in os.environ.items() if k not in ("HYPER_PARALLEL_SHMEM_HOST_ID", "MASTER_ADDR")}
    # TCP between the nodes on the veth; nothing else may join them (UCX would otherwise try CMA,
    # which works across network namespaces of one machine).
    env.update(UCX_TLS="tcp,self", UCX_NET_DEVICES=hosts.dev[node], OMP_NUM_THREADS="1")
    env.setdefault("SYMMETRIC_MEMORY_HEAP_SIZE", "512m")
    return env


def _run(hosts, procs, what):
    codes, outs = hosts.wait(procs, 900)
    if any(codes):
        raise RuntimeError(f"{what} failed:\n" + "\n".join(o[-3000:] for o in outs))


def run_ours(hosts, per_node, sizes, quick, tmp):
    path = os.path.join(tmp, "ours.json")
    procs = []
    for node in (0, 1):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node)]
        cmd += ["--nproc-per-node", str(per_node), "--master-addr", hosts.addr[0], "--master-port", str(PORT)]
        cmd += [os.path.abspath(__file__), "--worker", "ours", path, "--sizes", ",".join(map(str, sizes))]
        cmd += ["--quick"] if quick else []
        cmd += ["--ops", ",".join(_only)] if _only else []
        procs.append(hosts.popen(node, cmd, env=_node_env(hosts, node), cwd=ROOT))
    _run(hosts, procs, "our run")
    return json.load(open(path))


def run_mpi(hosts, per_node, sizes, quick, tmp, btl="tcp,self"):
    path = os.path.join(tmp, "mpi.json")
    agent = os.path.join(tmp, "agent")
    with open(agent, "w") as f:
        # Open MPI's remote launcher, called as "agent [options] HOST COMMAND": the command runs
        # on node B, in its namespaces, as realhosts.TwoHosts.popen would start it.
        f.write(
            "#!/bin/sh\n"
            'while [ "${1#-}" != "$1" ]; do shift; done\n'
            "shift\n"
            f"exec ip netns exec {hosts.ns[1]} unshare --ipc --mount --uts --propagation private "
            'sh -c "mount -t tmpfs tmpfs /dev/shm && hostname nodeB && $*"\n'
        )
    os.chmod(agent, 0o755)
    net = hosts.addr[0].rsplit(".", 1)[0] + ".0/24"
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(2 * per_node)]
    cmd += ["--host", f"{hosts.addr[0]}:{per_node},{hosts.addr[1]}:{per_node}", "--mca", "plm_rsh_agent", agent]
    cmd += ["--mca", "oob_tcp_if_include", net, "--mca", "btl_tcp_if_include", net]
    cmd += ["--mca", "pml", "ob1", "--mca", "btl", btl, "-x", "OMP_NUM_THREADS=1"]
    # Its ranks outnumber the cores at 2 per node: waiting ranks must yield, as ours do (Open MPI
    # only does so by itself when it counts more ranks than the slots it was given).
    cmd += ["--mca", "mpi_yield_when_idle", "1"]
    cmd += [sys.executable, os.path.abspath(__file__), "--worker", "mpi", path, "--sizes", ",".join(map(str, sizes))]
    cmd += ["--quick"] if quick else []
    cmd += ["--ops", ",".join(_only)] if _only else []
    _run(hosts, [hosts.popen(0, cmd, env=_node_env(hosts, 0), cwd=ROOT)], "Open MPI's run")
    return json.load(open(path))


def run_perftest(hosts):
    """ucx_perftest server on node B, client on node A: the wire's floor and ceiling for messages."""
    recs = []
    for test, size, iters, op in (
        ("ucp_am_lat", 8, 20000, "put_signal_one_way"),
        ("ucp_am_bw", 1 << 20, 2000, "put_bandwidth"),
        ("ucp_am_bw", 1 << 24, 200, "put_bandwidth"),
    ):
        args = ["ucx_perftest", "-p", str(PORT + 1), "-t", test, "-s", str(size), "-n", str(iters)]
        server = hosts.popen(1, args, env=_node_env(hosts, 1))
        time.sleep(0.5)
        client = hosts.popen(0, [*args, hosts.addr[1]], env=_node_env(hosts, 0))
        _, outs = hosts.wait([client, server], 120)
        final = [ln for ln in outs[0].splitlines() if ln.startswith("Final:")]
        if not final:
            print(f"ucx_perftest {test} gave no result:\n{outs[0][-1500:]}")
            continue
        f = final[0].split()
        # "Final: iters | latency typical avg overall (us, one way) | bandwidth avg overall (MiB/s) | ..."
        value = float(f[3] if test.endswith("lat") else f[5])
        if value <= 0:  # it has printed a zero bandwidth on this host now and then
            print(f"ucx_perftest {test} gave no usable figure: {final[0]}")
            continue
        lat_us = value if test.endswith("lat") else size / (value * 2**20) * 1e6
        recs.append({"op": op, "impl": f"ucx_perftest {test}", "ranks": 2, "bytes": size, "median_us": lat_us})
    return recs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-results", "realhosts.json"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--per-node", default="1,2", help="ranks per node, comma-separated")
    ap.add_argument("--worker", nargs=2, metavar=("KIND", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--sizes", help="comma-separated bytes per rank")
    ap.add_argument("--ops", help="comma-separated ops to time (default: all)")
    args = ap.parse_args()
    global _only
    if args.ops:
        _only = tuple(args.ops.split(","))
        unknown = set(_only) - {"put_signal_one_way", "barrier", *OPS}
        if unknown:
            ap.error(f"unknown ops {sorted(unknown)}: choose from put_signal_one_way, barrier, {', '.join(OPS)}")
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (QUICK_SIZES if args.quick else SIZES)
    if args.worker:
        kind, out = args.worker
        (_ours_worker if kind == "ours" else _mpi_worker)(out, sizes, args.quick)
        return 0

    from realhosts import TwoHosts, available

    why = available()
    if why:
        print(f"two real hosts cannot be made here: {why}")
        return 1
    best = {}

    def keep(recs):
        for r in recs:
            key = (r["op"], r["impl"], r["ranks"], r["bytes"])
            if key not in best or r["median_us"] < best[key]["median_us"]:
                best[key] = r

    with TwoHosts() as hosts, tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            keep(run_perftest(hosts))
            for per_node in (int(p) for p in args.per_node.split(",")):
                keep(run_ours(hosts, per_node, sizes, args.quick, tmp))
                keep(run_mpi(hosts, per_node, sizes, args.quick, tmp))
                if per_node > 1:  # shared memory within a node too; each figure keeps the faster
                    keep(run_mpi(hosts, per_node, sizes, args.quick, tmp, "tcp,self,vader"))
    recs = sorted(best.values(), key=lambda r: (r["ranks"], r["op"], r["bytes"], r["impl"]))
    print(f"{'op':20s} {'ranks':>5s} {'bytes':>10s} {'ours us':>10s} {'Open MPI us':>12s} {'ratio':>6s}")
    for r in recs:
        if r["impl"] != "hyper_parallel":
            continue
        peer = best.get((r["op"], "Open MPI", r["ranks"], r["bytes"]))
        pus = peer["median_us"] if peer else float("nan")
        ratio = r["median_us"] / pus
        print(f"{r['op']:20s} {r['ranks']:5d} {r['bytes']:10d} {r['median_us']:10.1f} {pus:12.1f} {ratio:6.2f}")
    for r in recs:
        if r["impl"].startswith("ucx_perftest"):
            print(f"{r['impl']:20s} {r['bytes']:10d} B {r['median_us']:10.1f} us")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(
            {
                "layout": "2 hosts: network namespaces joined by a veth pair, UCX/TCP and Open MPI btl tcp",
                "records": recs,
            },
            f,
            indent=1,
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
