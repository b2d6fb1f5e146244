"""Runs a scenario function in W real processes that form one job of a framework.

Each rank is its own process that imports the scenario's module by path and calls
``fn(rank, world_size, **kwargs)``. Nothing is mocked: the ranks share real memory. Ranks are forked
from a process that has imported their framework once (zygote.py), as costly as the rest of a job;
``HP_TEST_FRESH_RANKS=1`` starts each as a fresh interpreter instead.

* torch: the ranks join a gloo process group through a TCP store on a free loopback port
  (the unique id travels through that store).
* mindspore: the ranks get msrun's environment (RANK_ID, RANK_SIZE, MS_SCHED_HOST,
  MS_SCHED_PORT) and a job secret, and must not import torch; ``dist=False`` leaves the
  msrun variables out (the job then needs an explicit bootstrap endpoint).
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = os.path.join(HERE, "rank_worker.py")  # one rank of a job
ZYGOTE = os.path.join(HERE, "zygote.py")  # forks ranks with their framework already imported


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
    envs = []
    for r in range(world):
        renv = dict(penv, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r), **layout_env(layout, r, world))
        if framework == "mindspore":
            renv.update(RANK_ID=str(r), RANK_SIZE=str(world), MS_NODE_ID=str(r))
        envs.append(renv)
    argv = [WORKER, module_file, fn, None, str(world), str(port), json.dumps(kwargs or {})]
    t0 = time.monotonic()
    zygote = _zygote(framework)
    if zygote is not None:
        return _run_forked(zygote, argv, envs, timeout, t0)
    procs = []
    for r, renv in enumerate(envs):
        argv[3] = str(r)
        procs.append(
            subprocess.Popen(
                [sys.executable, *argv], env=renv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
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


_zygotes: dict = {}  # framework -> (process, socket name), one per framework and test process


def _zygote(framework: str):
    """The socket name of the process that forks `framework`'s ranks (started on first use), or None
    where ranks start as fresh interpreters ($HP_TEST_FRESH_RANKS=1, or the zygote would not start)."""
    if os.environ.get("HP_TEST_FRESH_RANKS") == "1":
        return None
    z = _zygotes.get(framework)
    if z is not None and z[0].poll() is None:
        return z[1]
    name = f"hp-test-zygote/{os.getpid()}/{framework}"
    # What the framework reads once, at load: the same values every job gives its ranks.
    zenv = dict(os.environ, OMP_NUM_THREADS="1", GLOG_v="3")
    proc = subprocess.Popen(
        [sys.executable, ZYGOTE, framework, name], env=zenv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    )
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        proc.wait()
        return None
    if not _zygotes:
        atexit.register(_stop_zygotes)
    _zygotes[framework] = (proc, name)
    return name


def _stop_zygotes():
    for proc, _ in _zygotes.values():
        proc.kill()
        proc.wait()
    _zygotes.clear()


def _run_forked(zygote: str, argv: list, envs: list, timeout: float, t0: float) -> JobResult:
    """run_job's ranks forked by the zygote: output through a pipe each, exit codes from the zygote."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect("\0" + zygote)
    pids, pipes = [], []
    try:
        for r, renv in enumerate(envs):
            argv[3] = str(r)
            rfd, wfd = os.pipe()
            req = json.dumps({"argv": argv, "env": renv, "cwd": os.getcwd()}).encode()
            socket.send_fds(sock, [req], [wfd])
            os.close(wfd)
            pipes.append(rfd)
            pids.append(int(sock.recv(64)))
        outputs = [bytearray() for _ in pipes]
        sel = selectors.DefaultSelector()
        for r, fd in enumerate(pipes):
            sel.register(fd, selectors.EVENT_READ, r)
        timed_out = False
        while sel.get_map():
            left = timeout - (time.monotonic() - t0)
            if left <= 0 and not timed_out:
                timed_out = True
                for pid in pids:
                    _kill(pid)
            if timed_out and left < -10:  # something the ranks started still holds a pipe
                break
            for key, _ in sel.select(timeout=max(0.1, left) if not timed_out else 1.0):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    outputs[key.data] += chunk
                else:
                    sel.unregister(key.fd)
        sel.close()
        sock.send(b"wait")
        codes = [int(sock.recv(64)) for _ in pids]
    finally:
        for fd in pipes:
            os.close(fd)
        sock.close()  # before "wait", the zygote kills the ranks
    text = [o.decode(errors="replace") for o in outputs]
    return JobResult(codes, text, time.monotonic() - t0, timed_out)


def _kill(pid: int):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


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
