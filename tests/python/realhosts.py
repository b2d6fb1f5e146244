"""Two real hosts on one machine: network namespaces joined by a veth pair, each node in its own IPC
and mount namespace with a private /dev/shm, so that nothing but the network joins them.

Used by the fault tests and by `make demo-hosts`. Needs root (``ip netns add``); ``available()``
says why not where the kernel or the user refuses. Addresses are in 198.18.0.0/15 only (the range
set aside for network benchmarks), so no traffic can leave the machine.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time

SUBNET = "198.18.{}.{}"


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def available():
    """None when two hosts can be made here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "needs root (ip netns add)"
    for tool in ("ip", "unshare", "tc"):
        if not shutil.which(tool):
            return f"{tool} is not installed (iproute2, util-linux)"
    probe = f"hpprobe{os.getpid()}"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"the kernel refuses network namespaces: {r.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


# Inside each node: a private /dev/shm, then the command; afterwards, what the job left in that
# /dev/shm and which TCP ports still listen, on one line each, for the tests to check.
_NODE_SH = r"""
mount -t tmpfs -o size=4g,mode=1777 tmpfs /dev/shm || exit 97
hostname "$HPNODE_NAME"
"$@"
rc=$?
sleep 0.2
echo "NODE-SHM-LEFT: $(ls -A /dev/shm | tr '\n' ' ')"
echo "NODE-PORTS-LEFT: $(ss -Htln 2>/dev/null | awk '{print $4}' | tr '\n' ' ')"
exit $rc
"""


class TwoHosts:
    """Nodes 0 and 1 at 198.18.<n>.1 and .2: ``popen(node, argv)`` starts a command on a node,
    ``link(False)`` takes the wire down, ``netem("delay 20ms")`` shapes it. Removes everything it
    made on exit, and kills what it started."""

    def __init__(self, net=None):
        tag = f"{os.getpid() % 100000}"
        self.ns = [f"hpA{tag}", f"hpB{tag}"]
        self.dev = [f"hpa{tag}", f"hpb{tag}"]
        n = net if net is not None else os.getpid() % 250 + 1
        self.addr = [SUBNET.format(n, 1), SUBNET.format(n, 2)]
        self.procs = []

    def __enter__(self):
        try:
            for ns in self.ns:
                _ip("netns", "add", ns)
            a, b = zip(self.dev, self.ns)
            _ip("link", "add", a[0], "netns", a[1], "type", "veth", "peer", "name", b[0], "netns", b[1])
            for ns, dev, addr in zip(self.ns, self.dev, self.addr):
                _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", dev, "up")
            self._wait_up()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def popen(self, node, argv, env=None, **kw):
        """Start argv on `node` (0 or 1), in its own process group, stdout and stderr together."""
        cmd = ["ip", "netns", "exec", self.ns[node], "unshare", "--ipc", "--mount", "--uts", "--propagation", "private"]
        env = dict(os.environ if env is None else env, HPNODE_NAME=f"node{'AB'[node]}")
        cmd += ["sh", "-c", _NODE_SH, "node", *argv]
        p = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            **kw,
        )
        self.procs.append(p)
        return p

    def _wait_up(self, timeout=10):
        # A veth end carries traffic (and UCX lists it) only once the kernel says "state UP", a
        # moment after both ends were set up.
        deadline = time.monotonic() + timeout
        for ns, dev in zip(self.ns, self.dev):
            while "state UP" not in _ip("-n", ns, "-o", "link", "show", "dev", dev).stdout:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{dev} in {ns} did not come up")
                time.sleep(0.02)

    def link(self, up):
        """The wire up or down, on both ends (a cable pulled)."""
        for ns, dev in zip(self.ns, self.dev):
            _ip("-n", ns, "link", "set", dev, "up" if up else "down")
        if up:
            self._wait_up()

    def netem(self, spec):
        """Shape both directions with netem, e.g. "delay 20ms" or "loss 5%"; None removes it.
        Returns None, or tc's reason when the kernel has no netem."""
        for ns, dev in zip(self.ns, self.dev):
            subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], capture_output=True)
            if spec:
                cmd = ["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem", *spec.split()]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    return r.stderr.strip() or f"tc exited with {r.returncode}"
        return None

    def throttle(self, rate="32mbit", queue="10ms"):
        """A slow wire that drops what overflows its queue (tbf): for kernels without netem. Returns
        the tc command's error, or None."""
        for ns, dev in zip(self.ns, self.dev):
            subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], capture_output=True)
            cmd = ["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", "32kb"]
            r = subprocess.run([*cmd, "latency", queue], capture_output=True, text=True)
            if r.returncode != 0:
                return r.stderr.strip() or f"tc exited with {r.returncode}"
        return None

    def dropped(self):
        """Packets the shaping dropped on both ends so far."""
        total = 0
        for ns, dev in zip(self.ns, self.dev):
            out = subprocess.run(["tc", "-n", ns, "-s", "qdisc", "show", "dev", dev], capture_output=True, text=True)
            total += sum(int(n) for n in re.findall(r"dropped (\d+)", out.stdout))
        return total

    def ns_pids(self, node):
        """Processes still alive in a node's network namespace."""
        r = _ip("netns", "pids", self.ns[node], check=False)
        return [int(x) for x in r.stdout.split()]

    def kill_all(self):
        """SIGKILL to everything running on either node (launchers put workers in their own sessions,
        so process groups are not enough)."""
        for node in (0, 1):
            for pid in self.ns_pids(node):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def wait(self, procs, timeout):
        """(return codes, outputs) of procs; past `timeout` s everything on both nodes is killed and
        the outputs end with "<killed: timeout>"."""
        deadline = time.monotonic() + timeout
        outs = []
        for p in procs:
            try:
                outs.append(p.communicate(timeout=max(0.1, deadline - time.monotonic()))[0])
            except subprocess.TimeoutExpired:
                self.kill_all()
                outs.append(p.communicate()[0] + "\n<killed: timeout>")
        return [p.returncode for p in procs], outs

    def __exit__(self, *exc):
        self.kill_all()
        for p in self.procs:
            p.wait()
        for ns in self.ns:
            for _ in range(50):
                if _ip("netns", "del", ns, check=False).returncode != 0 or ns not in _ip("netns", "list").stdout:
                    break
                time.sleep(0.1)
        return False


def main(argv):
    """Run a torchrun script on two real hosts, two ranks each: `python3 realhosts.py script.py`."""
    import sys

    if not argv:
        print("usage: realhosts.py SCRIPT [ARGS...]  (a torchrun script, run on two hosts x 2 ranks)")
        return 2
    why = available()
    if why:
        print(f"two real hosts cannot be made here: {why}")
        return 1
    with TwoHosts() as h:
        procs = []
        for node in (0, 1):
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node)]
            cmd += ["--nproc-per-node", "2", "--master-addr", h.addr[0], "--master-port", "29500", *argv]
            env = {k: v for k, v in os.environ.items() if k not in ("HYPER_PARALLEL_SHMEM_HOST_ID", "MASTER_ADDR")}
            env.setdefault("SYMMETRIC_MEMORY_HEAP_SIZE", "256m")
            # examples/ring.py checks against gloo, which binds the interface its host name resolves to.
            env["GLOO_SOCKET_IFNAME"] = h.dev[node]
            procs.append(h.popen(node, cmd, env=env))
        codes, outs = h.wait(procs, 600)
    for node, out in enumerate(outs):
        print(f"--- node {'AB'[node]} ({h.addr[node]}), exit {codes[node]}")
        print(out.rstrip())
    return 0 if codes == [0, 0] else 1


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
