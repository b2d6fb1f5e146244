"""``oshcc``, ``oshc++`` and ``oshrun``: build and start OpenSHMEM programs on libhpshmem.

``oshcc [compiler arguments]`` runs the C compiler ($OSHCC, else cc) with shmem.h's
directory, and, when it links, libhpshmem with an rpath to it. ``oshc++`` does the
same with $OSHCXX, else c++. ``oshcc --showme`` prints the command instead.

``oshrun -np N [--hosts H | --host-id ID,...] [--] program [arguments]`` starts N PEs
of the program on this host. Rank 0 opens the rendezvous and tells the launcher,
which then starts the rest with it (no port is chosen in advance, so two jobs never
collide). Each PE dies with the launcher (it is killed too, even by SIGKILL);
SIGINT, SIGTERM and SIGHUP are passed on to every PE; when a PE fails (non-zero
exit, or killed by a signal) the others are ended (SIGTERM, then SIGKILL after
``--grace`` seconds). The exit status is the first failing PE's (128 + signal
number for a signal), else 0. ``--hosts H`` simulates H hosts on this machine
(consecutive blocks of PEs get distinct HYPER_PARALLEL_SHMEM_HOST_ID values and
reach each other through UCX over TCP on loopback), ``--host-id`` gives each PE's
host identity explicitly.

On several real hosts, run ``oshrun -np N --nnodes M --node-rank K --master-addr A
[--master-port P] program`` on each of the M hosts (K = 0 .. M-1): host K starts
PEs K*N/M .. (K+1)*N/M - 1, and PE 0 (on host 0) listens for the others at A:P
(A: host 0's address as the others reach it). Set the same
HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET on every host to keep other jobs out.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional, Sequence

_PR_SET_PDEATHSIG = 1


def _package_dir() -> Path:
    # The compiled parts sit beside the extension module (also in editable installs,
    # where the Python sources stay in the source tree).
    spec = importlib.util.find_spec("hyper_parallel._hpshmem")
    if spec is None or spec.origin is None:
        raise RuntimeError("hyper_parallel is not built: run `make install` (pip install -e .)")
    return Path(spec.origin).parent / "oshmem"


def include_dir() -> Path:
    """The directory holding shmem.h."""
    return _package_dir() / "include"


def library_dir() -> Path:
    """The directory holding libhpshmem.so."""
    return _package_dir() / "lib"


def _compile(default: str, env_var: str, args: Sequence[str]) -> int:
    show = "--showme" in args
    args = [a for a in args if a != "--showme"]
    compiler = shlex.split(os.environ.get(env_var, default))
    lib = library_dir()
    cmd = compiler + [f"-I{include_dir()}"] + list(args)
    # Link flags only when this command links.
    if not any(a in ("-c", "-E", "-S", "-M", "-MM") for a in args) and args:
        cmd += [f"-L{lib}", f"-Wl,-rpath,{lib}", "-lhpshmem"]
    if show:
        print(shlex.join(cmd))
        return 0
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        print(f"oshcc: cannot run {cmd[0]}: {e}", file=sys.stderr)
        return 127
    return 0  # not reached


def oshcc(argv: Optional[List[str]] = None) -> int:
    """The C compiler wrapper."""
    return _compile("cc", "OSHCC", sys.argv[1:] if argv is None else argv)


def oshcxx(argv: Optional[List[str]] = None) -> int:
    """The C++ compiler wrapper."""
    return _compile("c++", "OSHCXX", sys.argv[1:] if argv is None else argv)


def _child_setup() -> None:
    # Own process group: a terminal's Ctrl-C reaches the launcher, which passes it on once.
    os.setpgid(0, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the launcher already died between fork and prctl
        os._exit(137)


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="oshrun", description="Start an OpenSHMEM program's PEs on this host.")
    p.add_argument("-np", "-n", "--np", dest="np", type=int, required=True, help="number of PEs")
    hosts = p.add_mutually_exclusive_group()
    hosts.add_argument("--hosts", type=int, default=1, help="simulate this many hosts (blocks of PEs)")
    hosts.add_argument("--host-id", default=None, help="comma-separated host identity of each PE")
    p.add_argument("--grace", type=float, default=3.0, help="seconds between SIGTERM and SIGKILL")
    p.add_argument("--nnodes", type=int, default=1, help="real hosts of the job (run oshrun on each)")
    p.add_argument("--node-rank", type=int, default=0, help="this host's number, 0 .. nnodes-1")
    p.add_argument("--master-addr", default=None, help="host 0's address, where PE 0 listens (with --nnodes)")
    p.add_argument("--master-port", type=int, default=29400, help="PE 0's port on --master-addr")
    p.add_argument("program")
    p.add_argument("args", nargs=argparse.REMAINDER)
    ns = p.parse_args(argv)
    if ns.np < 1:
        p.error("-np must be at least 1")
    if ns.hosts < 1 or ns.hosts > ns.np:
        p.error("--hosts must be between 1 and -np")
    if ns.nnodes < 1 or not 0 <= ns.node_rank < ns.nnodes:
        p.error(f"--nnodes must be at least 1 and --node-rank in [0, {ns.nnodes - 1}]")
    if ns.nnodes > 1:
        if not ns.master_addr:
            p.error("--nnodes > 1 needs --master-addr (host 0's address)")
        if ns.np % ns.nnodes:
            p.error(f"-np {ns.np} is not a multiple of --nnodes {ns.nnodes}")
        if ns.hosts > 1 or ns.host_id is not None:
            p.error("--hosts and --host-id simulate hosts on one machine; --nnodes runs on real ones")
        if not 0 < ns.master_port < 65536:
            p.error("--master-port must be in [1, 65535]")
    if ns.host_id is not None:
        ids = ns.host_id.split(",")
        if len(ids) != ns.np or not all(ids):
            p.error(f"--host-id needs {ns.np} non-empty comma-separated identities, got {len(ids)}")
        ns.host_ids = ids
    elif ns.hosts > 1:
        ns.host_ids = [f"oshrun-host{r * ns.hosts // ns.np}" for r in range(ns.np)]
    else:
        ns.host_ids = None
    return ns


def _status(code: int) -> int:
    return 128 - code if code < 0 else code


def oshrun(argv: Optional[List[str]] = None) -> int:
    """The launcher; returns the job's exit status."""
    ns = _parse(sys.argv[1:] if argv is None else argv)
    cmd = [ns.program] + list(ns.args)
    base = dict(os.environ)
    base["HYPER_PARALLEL_SHMEM_NRANKS"] = str(ns.np)
    for k in ("HYPER_PARALLEL_SHMEM_UNIQUE_ID", "HYPER_PARALLEL_SHMEM_UNIQUE_ID_FD"):
        base.pop(k, None)
    # shmem_global_exit(status) writes its status here: the job then ends with it.
    exit_r, exit_w = os.pipe()
    base["HYPER_PARALLEL_SHMEM_EXIT_FD"] = str(exit_w)
    global_status: List[int] = []
    if ns.host_ids:
        base.setdefault("UCX_TLS", "tcp,self")
        base.setdefault("UCX_NET_DEVICES", "lo")

    procs: List[subprocess.Popen] = []

    def env_for(rank: int) -> dict:
        e = dict(base)
        e["HYPER_PARALLEL_SHMEM_RANK"] = str(rank)
        if ns.host_ids:
            e["HYPER_PARALLEL_SHMEM_HOST_ID"] = ns.host_ids[rank]
        return e

    def start(rank: int, env: dict, pass_fds=()) -> None:
        try:
            procs.append(
                subprocess.Popen(
                    cmd,
                    env=env,
                    pass_fds=(exit_w, *pass_fds),
                    preexec_fn=_child_setup,
                    stdin=None if rank == 0 else subprocess.DEVNULL,
                )
            )
        except OSError as e:
            raise SystemExit(f"oshrun: cannot start {ns.program}: {e}") from None

    def forward(signum, _frame) -> None:
        # No poll() here: it would reap a PE behind _watch's back (this runs on
        # the global-exit thread too). returncode is set once _watch reaped it.
        for p in list(procs):
            if p.returncode is None:
                try:
                    os.kill(p.pid, signum)
                except ProcessLookupError:
                    pass

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)

    def on_global_exit() -> None:
        with os.fdopen(exit_r, "rb") as f:
            line = f.readline()
        if not line.strip():
            return  # every PE closed its end: nobody called shmem_global_exit
        try:
            global_status.append(int(line) & 0xFF)
        except ValueError:
            global_status.append(1)
        forward(signal.SIGTERM, None)

    reader = threading.Thread(target=on_global_exit, daemon=True)
    reader.start()

    try:
        if ns.nnodes > 1:
            # Every PE of every host meets PE 0 at the address given: no unique id to hand around.
            base["HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT"] = f"tcp://{ns.master_addr}:{ns.master_port}"
            local = ns.np // ns.nnodes
            for rank in range(ns.node_rank * local, (ns.node_rank + 1) * local):
                start(rank, env_for(rank))
        elif ns.np == 1:
            start(0, env_for(0))
        else:
            r, w = os.pipe()
            e0 = env_for(0)
            e0["HYPER_PARALLEL_SHMEM_UNIQUE_ID_FD"] = str(w)
            start(0, e0, pass_fds=(w,))
            os.close(w)
            uid = _read_line(r, procs[0])
            os.close(r)
            if uid is None:
                code = procs[0].wait()
                print(
                    f"oshrun: PE 0 exited ({_status(code)}) before it opened the rendezvous "
                    "(does the program call shmem_init?)",
                    file=sys.stderr,
                )
                return _status(code) or 1
            for rank in range(1, ns.np):
                e = env_for(rank)
                e["HYPER_PARALLEL_SHMEM_UNIQUE_ID"] = uid
                start(rank, e)
        # Our copy of the write end goes once every PE has its own: the reader
        # then sees the end of the pipe when the last PE exits.
        os.close(exit_w)
        status = _watch(procs, ns.grace)
        reader.join(timeout=5)  # every write end is closed now: it returns at once
        return global_status[0] if global_status else status
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _read_line(fd: int, proc: subprocess.Popen) -> Optional[str]:
    buf = b""
    while not buf.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            if proc.poll() is not None:
                return None
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buf += chunk
    return buf.decode().strip()


def _watch(procs: List[subprocess.Popen], grace: float) -> int:
    first_failure: Optional[int] = None
    kill_at: Optional[float] = None
    pending = {p.pid: p for p in procs}
    while pending:
        if kill_at is None:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
        else:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                if time.monotonic() >= kill_at:
                    for p in pending.values():
                        p.kill()
                time.sleep(0.01)
                continue
        p = pending.pop(pid, None)
        if p is None:
            continue
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0 and first_failure is None:
            first_failure = _status(p.returncode)
            for q in pending.values():
                try:
                    os.kill(q.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            kill_at = time.monotonic() + grace
    return first_failure or 0


def _main_oshrun() -> None:
    sys.exit(oshrun())


def _main_oshcc() -> None:
    sys.exit(oshcc())


def _main_oshcxx() -> None:
    sys.exit(oshcxx())
