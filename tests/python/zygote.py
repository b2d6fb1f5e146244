"""A process that imports one framework once and forks the ranks of test jobs from there.

Importing torch or MindSpore takes a rank 2-4 s of CPU, which on a 2-core host was most of the
suite's time: every rank of every job paid it. launcher.run_job asks this process instead, over a
Unix socket, to fork each rank; the rank then runs rank_worker.py as a fresh process would, with the
job's environment, working directory and output pipe. Only the framework (and NumPy) is loaded
before the fork; the library itself, UCX and every runtime thread start in the rank.

    python zygote.py FRAMEWORK SOCKET_NAME      (an abstract socket name, without the leading NUL)

Protocol (SOCK_SEQPACKET, one message each): a JSON request {"argv", "env", "cwd"} with the write
end of the rank's output pipe attached -> the rank's pid; then b"wait" -> each rank's exit code
(negative: killed by that signal) in the order they were started. A connection that closes before
"wait" kills its ranks. The process ends with its parent (PR_SET_PDEATHSIG), and its ranks with it.
"""

import ctypes
import json
import os
import signal
import socket
import sys

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _run_rank(req, out_fd):
    _die_with_parent()
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["cwd"])
    # A forked process inherits its parent's random state: reseed what a fresh one seeds from the OS.
    import random

    import numpy as np

    random.seed()
    np.random.seed()
    sys.argv = list(req["argv"])
    import runpy

    runpy.run_path(sys.argv[0], run_name="__main__")  # rank_worker ends the process itself
    os._exit(0)


def _serve(conn):
    pids = []
    try:
        while True:
            msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 1)
            if not msg or msg == b"wait":
                break
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                conn.close()
                try:
                    _run_rank(json.loads(msg), fds[0])
                finally:
                    os._exit(1)
            os.close(fds[0])
            pids.append(pid)
            conn.send(str(pid).encode())
        if msg != b"wait":  # the launcher went away mid-job: nothing of it may stay
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            if msg == b"wait":
                conn.send(str(os.waitstatus_to_exitcode(status)).encode())
    finally:
        conn.close()


def main():
    framework, name = sys.argv[1], sys.argv[2]
    _die_with_parent()
    import numpy  # noqa: F401

    if framework == "mindspore":
        import mindspore  # noqa: F401
    else:
        import torch.distributed  # noqa: F401
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind("\0" + name)
    srv.listen(4)
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        _serve(conn)


if __name__ == "__main__":
    main()
