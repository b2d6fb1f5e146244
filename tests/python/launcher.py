"""Runs a scenario function in W real processes that form one job of a framework.

Each rank is a fresh `python` process that imports the scenario's module by path and
calls ``fn(rank, world_size, **kwargs)``. Nothing is mocked: the ranks share real memory.

* torch: the ranks join a gloo process group through a TCP store on a free loopback port
  (the unique id travels through that store).
* mindspore: the ranks get msrun's environment (RANK_ID, RANK_SIZE, MS_SCHED_HOST,
  MS_SCHED_PORT) and a job secret, and must not import torch; ``dist=False`` leaves the
  msrun variables out (the job then needs an explicit bootstrap endpoint).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = os.path.join(HERE, "rank_worker.py")  # one rank of a job


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JobResult:
    def __init__(self, codes, outputs, seconds, timed_out):
        self.codes = codes
        self.outputs = outputs
        self.seconds = seconds
        self.timed_out = timed_out

    def describe(self) -> str:
        parts = [f"timed out={self.timed_out} seconds={self.seconds:.1f}"]
        for r, (c, o) in enumerate(zip(self.codes, self.outputs)):
            parts.append(f"--- rank {r}: exit {c}\n{o[-4000:]}")
        return "\n".join(parts)


LAYOUTS = ("shm", "hosts", "ucx")


def layout_env(layout: str, rank: int, world: int) -> dict:
    """Variables that place rank `rank` under `layout`: "shm" (one host, shared memory), "hosts" (two
    simulated hosts, the first half of the ranks on host0; UCX over TCP on loopback between them) or
    "ucx" (one host, UCX between every pair)."""
    if layout == "shm":
        return {}
    env = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"}  # loopback only
    if layout == "hosts":
        env["HYPER_PARALLEL_SHMEM_HOST_ID"] = f"host{rank * 2 // world}"
    elif layout == "ucx":
        env["HYPER_PARALLEL_SHMEM_TRANSPORT"] = "ucx"
    else:
        raise ValueError(f"layout {layout!r} is not one of {LAYOUTS}")
    return env


def run_job(
    module_file: str,
    fn: str,
    world: int,
    *,
    timeout: float = 120,
    env: dict | None = None,
    kwargs: dict | None = None,
    dist: bool = True,
    framework: str = "torch",
    layout: str = "shm",
) -> JobResult:
    """Start `world` ranks of `framework` running `fn` from `module_file` with the ranks placed by
    `layout` (see layout_env); kill all after `timeout` s."""
    port = free_port()
    penv = dict(os.environ)
    penv["HP_TEST_FRAMEWORK"] = framework
    if framework == "mindspore":
        if dist:  # no scheduler runs: the library only derives its port (MS_SCHED_PORT + 13) from it
            penv.update(
                MS_SCHED_HOST="127.0.0.1", MS_SCHED_PORT=str(port - 13), MS_WORKER_NUM=str(world), MS_ROLE="MS_WORKER"
            )
        penv["HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET"] = os.urandom(16).hex()
        penv["GLOG_v"] = "3"  # MindSpore's own log: errors only
    penv.setdefault("SYMMETRIC_MEMORY_HEAP_SIZE", "256m")
    penv.setdefault("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", "30")
    penv["OMP_NUM_THREADS"] = "1"
    if not dist:
        penv["HP_TEST_NO_DIST"] = "1"
    penv.update(env or {})
    procs = []
    t0 = time.monotonic()
    for r in range(world):
        renv = dict(penv, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r), **layout_env(layout, r, world))
        if framework == "mindspore":
            renv.update(RANK_ID=str(r), RANK_SIZE=str(world), MS_NODE_ID=str(r))
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    WORKER,
                    module_file,
                    fn,
                    str(r),
                    str(world),
                    str(port),
                    json.dumps(kwargs or {}),
                ],
                env=renv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    timed_out = False
    outputs = []
    for p in procs:
        left = max(0.1, timeout - (time.monotonic() - t0))
        try:
            out, _ = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            timed_out = True
            for q in procs:
                q.kill()
            out, _ = p.communicate()
        outputs.append(out or "")
    return JobResult([p.returncode for p in procs], outputs, time.monotonic() - t0, timed_out)


def assert_job_ok(module_file: str, fn: str, world: int, **kw) -> JobResult:
    res = run_job(module_file, fn, world, **kw)
    assert not res.timed_out and all(c == 0 for c in res.codes), res.describe()
    return res


def leftovers() -> list[str]:
    """Shared-memory names and this library's abstract sockets: none may outlive a job."""
    out = sorted("/dev/shm/" + n for n in os.listdir("/dev/shm"))
    with open("/proc/net/unix") as f:
        out += sorted(line.split()[-1] for line in f if "@hpshmem/" in line)
    return out
