"""Jobs on two real hosts: network namespaces joined by a veth pair, each node with its own IPC and
mount namespace, private /dev/shm and host name (realhosts.py), two ranks per node under
``torchrun --nnodes 2`` with the rendezvous on node A's address. Nothing tells the library which
address or device to use: it finds them. Faults are made on the wire itself (link down, netem) or
to the processes (kill -9, a bad setting on one node).

After every job: the error names the right ranks and host, every process is gone, nothing is left in
either node's /dev/shm and no port listens.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from realhosts import TwoHosts, available

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORKER = os.path.join(HERE, "hosts_fault_worker.py")

_why_not = available()
pytestmark = pytest.mark.skipif(_why_not is not None, reason=f"two real hosts cannot be made here: {_why_not}")


def _start(hosts, tmp_path, rounds, env_by_node=({}, {}), **env):
    procs = []
    port = 29000 + os.getpid() % 1000
    for node in (0, 1):
        e = dict(os.environ, SYMMETRIC_MEMORY_HEAP_SIZE="256m", OMP_NUM_THREADS="1")
        e.update(FAULT_DIR=str(tmp_path), FAULT_ROUNDS=str(rounds), **env)
        e.update(env_by_node[node])
        for var in ("HYPER_PARALLEL_SHMEM_HOST_ID", "UCX_TLS", "UCX_NET_DEVICES", "MASTER_ADDR"):
            e.pop(var, None)
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node)]
        argv += ["--nproc-per-node", "2", "--master-addr", hosts.addr[0], "--master-port", str(port), WORKER]
        procs.append(hosts.popen(node, argv, env=e, cwd=ROOT))
    return procs


def _start_direct(hosts, tmp_path, rounds, nodes=(0, 1), **env):
    """Two ranks on each of `nodes`, started without a launcher: ranks from RANK / WORLD_SIZE, the
    library's bootstrap listening on node A's address."""
    procs = []
    endpoint = f"tcp://{hosts.addr[0]}:{29000 + os.getpid() % 1000}"
    for node in nodes:
        for local in (0, 1):
            e = dict(os.environ, SYMMETRIC_MEMORY_HEAP_SIZE="64m", OMP_NUM_THREADS="1", FAULT_BACKEND="none")
            e.update(FAULT_DIR=str(tmp_path), FAULT_ROUNDS=str(rounds), RANK=str(2 * node + local), WORLD_SIZE="4")
            e.update(HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT=endpoint, HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET="s3cr3t")
            e.update(env)
            for var in ("HYPER_PARALLEL_SHMEM_HOST_ID", "UCX_TLS", "UCX_NET_DEVICES", "MASTER_ADDR"):
                e.pop(var, None)
            procs.append(hosts.popen(node, [sys.executable, WORKER], env=e, cwd=ROOT))
    return procs


def _wait_ready(tmp_path, procs, n=4, timeout=90):
    deadline = time.monotonic() + timeout
    while len(glob.glob(str(tmp_path / "ready.*"))) < n:
        assert time.monotonic() < deadline, "the job did not get going"
        assert all(p.poll() is None for p in procs), "a node ended before the job got going"
        time.sleep(0.05)


def _finish(hosts, procs, timeout):
    """{rank: result line} and the whole output, after checking that nothing outlived the job."""
    codes, outs = hosts.wait(procs, timeout)
    out = "\n".join(outs)
    assert "<killed: timeout>" not in out, out[-6000:]
    results = {int(m.group(1)): m.group(2) for m in re.finditer(r"RESULT rank=(\d+) (.*?)(?=RESULT rank=|\n|$)", out)}
    for node in (0, 1):
        assert hosts.ns_pids(node) == [], f"processes left on node {node}"
    for line in re.findall(r"NODE-(?:SHM|PORTS)-LEFT:.*", out):
        assert line.split(":", 1)[1].strip() == "", f"{line}\n{out[-4000:]}"
    assert len(re.findall(r"NODE-SHM-LEFT", out)) == len(procs), out[-4000:]
    return codes, results, out


def test_a_job_across_two_real_hosts_finds_its_addresses_and_leaves_nothing(tmp_path):
    with TwoHosts() as h:
        procs = _start(h, tmp_path, rounds=300)
        codes, results, out = _finish(h, procs, 180)
    assert codes == [0, 0], out[-6000:]
    assert all(results.get(r) == "ok rounds=300" for r in range(4)), results


def test_link_down_for_good_is_named_as_the_network_on_every_rank(tmp_path):
    with TwoHosts() as h:
        procs = _start(
            h,
            tmp_path,
            rounds=10**8,
            HYPER_PARALLEL_SHMEM_PEER_TIMEOUT_SEC="3",
            HYPER_PARALLEL_SHMEM_TIMEOUT_SEC="60",
        )
        _wait_ready(tmp_path, procs)
        t0 = time.monotonic()
        h.link(False)
        codes, results, out = _finish(h, procs, 90)
        took = time.monotonic() - t0
    assert sorted(results) == [0, 1, 2, 3], out[-6000:]
    for r, line in results.items():
        # A wait names the ranks silent past the timeout, with their host (the other host's second rank
        # may still be a heartbeat short of it); a transfer caught in flight, the one it went to.
        far, host = ("23", "nodeB") if r < 2 else ("01", "nodeA")
        assert "PeerDeadError" in line and "became unreachable" in line and "network" in line, line
        assert re.search(rf"rank(\(s\))? [{far}](, [{far}])? \(host {host}\)", line), line
    assert took < 30, f"the ranks took {took:.1f} s to give up (peer timeout 3 s)"


def test_a_two_second_outage_is_survived_with_correct_results(tmp_path):
    with TwoHosts() as h:
        procs = _start(h, tmp_path, rounds=6000)
        _wait_ready(tmp_path, procs)
        h.link(False)
        time.sleep(2)
        h.link(True)
        codes, results, out = _finish(h, procs, 180)
    # Every round's values are checked by the ranks themselves.
    assert codes == [0, 0] and all(results.get(r) == "ok rounds=6000" for r in range(4)), out[-6000:]


@pytest.mark.parametrize("size, victim", [(1021, 3), (262147, 1)], ids=["small-on-node-B", "1MiB-per-rank-on-node-A"])
def test_a_rank_killed_on_either_host_is_named_at_once(tmp_path, size, victim):
    with TwoHosts() as h:
        procs = _start(h, tmp_path, rounds=10**8, HYPER_PARALLEL_SHMEM_TIMEOUT_SEC="60", FAULT_SIZE=str(size))
        _wait_ready(tmp_path, procs)
        t0 = time.monotonic()
        os.kill(int((tmp_path / f"ready.{victim}").read_text()), 9)
        codes, results, out = _finish(h, procs, 90)
        took = time.monotonic() - t0
    survivors = [r for r in range(4) if r != victim]
    host = "nodeA" if victim < 2 else "nodeB"
    assert sorted(results) == survivors, out[-6000:]
    for r in survivors:
        # A wait or barrier lists the lost ranks; a transfer caught in flight names the one it went to.
        # The list may hold a survivor of the victim's host too, when that one has already left on its
        # own error by the time this rank notices (its host-mate sees the death at once).
        line = results[r]
        assert "PeerDeadError" in line, line
        assert re.search(rf"rank\(s\) (?:\d+, )*{victim}\b|to rank {victim} \(host {host}\): the rank", line), line
        if r // 2 != victim // 2:  # across the wire, the host is named
            assert f"(host {host})" in line, line
    assert took < 20, f"{took:.1f} s to notice a killed rank"


def test_a_node_whose_ranks_fail_their_init_is_named_by_the_other_at_once(tmp_path):
    with TwoHosts() as h:
        t0 = time.monotonic()
        procs = _start(
            h,
            tmp_path,
            rounds=10,
            env_by_node=({}, {"SYMMETRIC_MEMORY_HEAP_SIZE": "lots"}),
            HYPER_PARALLEL_SHMEM_TIMEOUT_SEC="60",
        )
        codes, results, out = _finish(h, procs, 90)
        took = time.monotonic() - t0
    assert codes[0] != 0 and codes[1] != 0, out[-6000:]
    for r in (0, 1):
        assert re.search(r"rank [23] failed to start: SYMMETRIC_MEMORY_HEAP_SIZE='lots'", results[r]), results
    assert took < 45, f"{took:.1f} s (the bootstrap timeout is 60 s)"


def test_collectives_are_correct_over_a_slow_lossy_wire(tmp_path):
    with TwoHosts() as h:
        if h.netem("delay 20ms loss 5%") is None:
            procs = _start(h, tmp_path, rounds=25)
        else:  # no netem in this kernel: a 32 Mbit/s wire with a 10 ms queue, which drops what overflows
            why = h.throttle()
            if why:
                pytest.skip(f"neither netem nor tbf is available in this kernel: {why}")
            procs = _start(h, tmp_path, rounds=12, FAULT_SIZE="65537")
        codes, results, out = _finish(h, procs, 240)
        dropped = h.dropped()
    # Every round's values are checked by the ranks themselves.
    assert codes == [0, 0] and all(results.get(r, "").startswith("ok rounds=") for r in range(4)), out[-6000:]
    assert dropped > 0, "the wire dropped nothing: the test saw no loss"


def test_a_node_started_late_joins_the_job(tmp_path):
    with TwoHosts() as h:
        procs = _start_direct(h, tmp_path, rounds=100, nodes=(0,))
        time.sleep(30)  # node A's ranks are waiting in the bootstrap meanwhile (its timeout: 120 s)
        assert all(p.poll() is None for p in procs), "node A gave up on a late node"
        procs += _start_direct(h, tmp_path, rounds=100, nodes=(1,))
        codes, results, out = _finish(h, procs, 120)
    assert codes == [0] * 4 and all(results.get(r) == "ok rounds=100" for r in range(4)), out[-6000:]


def test_a_node_that_never_starts_is_named_at_the_bootstrap_timeout(tmp_path):
    with TwoHosts() as h:
        t0 = time.monotonic()
        procs = _start_direct(h, tmp_path, rounds=10, nodes=(0,), HYPER_PARALLEL_SHMEM_TIMEOUT_SEC="5")
        codes, results, out = _finish(h, procs, 60)
        took = time.monotonic() - t0
    assert sorted(results) == [0, 1] and all(c != 0 for c in codes), out[-6000:]
    assert "rank(s) 2, 3 did not join" in results[0], results
    assert "BootstrapError" in results[1] or "TimeoutError" in results[1], results
    assert took < 40, f"{took:.1f} s"


def _oshrun_both(hosts, exe, **env):
    procs = []
    for node in (0, 1):
        e = dict(os.environ, SYMMETRIC_MEMORY_HEAP_SIZE="64m", HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET="osh", **env)
        for var in ("HYPER_PARALLEL_SHMEM_HOST_ID", "UCX_TLS", "UCX_NET_DEVICES"):
            e.pop(var, None)
        argv = [shutil.which("oshrun") or "oshrun", "-np", "4", "--nnodes", "2", "--node-rank", str(node)]
        argv += ["--master-addr", hosts.addr[0], "--master-port", str(29000 + os.getpid() % 1000), str(exe)]
        procs.append(hosts.popen(node, argv, env=e))
    return procs


def test_openshmem_program_under_oshrun_on_two_real_hosts(tmp_path):
    exe = tmp_path / "hello"
    subprocess.run(["oshcc", "-o", str(exe), os.path.join(ROOT, "examples", "oshmem", "hello.c")], check=True)
    with TwoHosts() as h:
        procs = _oshrun_both(h, exe)
        codes, _, out = _finish(h, procs, 120)
    assert codes == [0, 0], out[-4000:]
    for pe in range(4):  # each PE got its left neighbour's greeting, across the hosts for PEs 0 and 2
        assert f'PE {pe} of 4 got "hello from PE {(pe - 1) % 4}"' in out, out[-4000:]
    assert "sum of PE numbers: 6 (expected 6)" in out, out[-4000:]


def test_mindspore_moe_layer_under_msrun_on_two_real_hosts(tmp_path):
    with TwoHosts() as h:
        procs = []
        for node in (0, 1):
            e = dict(os.environ, SYMMETRIC_MEMORY_HEAP_SIZE="256m", OMP_NUM_THREADS="1", GLOG_v="3")
            e.pop("HYPER_PARALLEL_SHMEM_HOST_ID", None)
            argv = ["msrun", "--worker_num", "4", "--local_worker_num", "2", "--master_addr", h.addr[0]]
            argv += ["--master_port", str(29000 + os.getpid() % 1000), "--node_rank", str(node)]
            argv += ["--log_dir", str(tmp_path / f"node{node}"), "--join", "True", "--cluster_time_out", "60"]
            procs.append(
                h.popen(node, [*argv, os.path.join(ROOT, "examples", "mindspore", "moe_layer.py")], env=e, cwd=ROOT)
            )
        codes, _, out = _finish(h, procs, 240)
    logs = "".join(p.read_text() for p in sorted(tmp_path.glob("node*/worker_*.log")))
    assert codes == [0, 0], out[-3000:] + logs[-3000:]
    # Every rank trained (the example checks its loss fell) and rank 0 saw the layer match.
    assert all(f"rank {r}: loss" in logs for r in range(4)) and "moe_layer OK" in logs, logs[-3000:]
    assert "WARN" not in logs, logs[-3000:]
