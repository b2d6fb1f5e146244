"""The examples and the launchers users start jobs with: torchrun, torch.multiprocessing.spawn
and MindSpore's msrun."""

import os
import subprocess
import sys

from launcher import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _torchrun(nproc, script, timeout=180):
    env = dict(os.environ, SYMMETRIC_MEMORY_HEAP_SIZE="64m", OMP_NUM_THREADS="1")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            str(nproc),
            os.path.join(ROOT, "examples", script),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_rfc_example_put_signal_under_torchrun():
    r = _torchrun(2, "put_signal.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 1: received after the signal" in r.stdout and "(matches rank 0)" in r.stdout, r.stdout


def test_ring_allreduce_example_matches_gloo_on_4_ranks():
    r = _torchrun(4, "ring.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("matches gloo all_reduce") == 4, r.stdout


def test_rfc_example_fused_all_gather_matmul_under_torchrun():
    r = _torchrun(2, "fused_all_gather_matmul.py", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("match gloo all_gather + matmul") == 2, r.stdout


def test_moe_layer_example_trains_under_torchrun_on_3_ranks():
    # 3 ranks do not divide its 8 experts: the buffer is refused on every rank, clearly.
    r = _torchrun(3, "moe_layer.py")
    assert r.returncode != 0 and "num_experts must be a positive multiple" in r.stdout + r.stderr, r.stdout + r.stderr
    r = _torchrun(4, "moe_layer.py", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "moe_layer OK" in r.stdout and r.stdout.count("over 20 steps") == 4, r.stdout


SPAWN_SCRIPT = r"""
import os, socket, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp

def work(rank, world, port):
    import hyper_parallel.core.symmetric_memory as symm
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = symm.empty(world, dtype=torch.int64)
    t.fill_(-1)
    symm.barrier()
    for p in range(world):
        symm.shmem_put(t, rank, torch.tensor([rank * 10]), 0, 1, p)
    symm.barrier()
    assert t.tolist() == [r * 10 for r in range(world)], t.tolist()
    symm.finalize()
    dist.destroy_process_group()

if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    mp.spawn(work, args=(3, port), nprocs=3, join=True)
    print("spawn ok")
"""


def test_torch_multiprocessing_spawn(tmp_path):
    script = tmp_path / "spawn_job.py"
    script.write_text(SPAWN_SCRIPT)
    env = dict(os.environ, SYMMETRIC_MEMORY_HEAP_SIZE="16m", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "spawn ok" in r.stdout, r.stdout + r.stderr


def test_platform_choice_is_forced_by_environment():
    code = "import hyper_parallel.platform as p; p.get_platform()"
    env = dict(os.environ, HYPER_PARALLEL_PLATFORM="tensorflow")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "HYPER_PARALLEL_PLATFORM='tensorflow' is not one of" in r.stderr, r.stderr
    code = (
        "import sys, hyper_parallel.core.symmetric_memory as s\n"
        "print(s.debug_state()['platform'], 'torch' in sys.modules, 'mindspore' in sys.modules)"
    )
    for forced, want in (("torch", "torch True False"), ("mindspore", "mindspore False True")):
        env["HYPER_PARALLEL_PLATFORM"] = forced
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.strip() == want, r.stdout + r.stderr
    # Unforced, a framework the program already imported wins, and nothing else is imported.
    env.pop("HYPER_PARALLEL_PLATFORM")
    r = subprocess.run([sys.executable, "-c", "import mindspore\n" + code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "mindspore False True", r.stdout + r.stderr


def test_empty_without_a_process_group_says_what_to_do():
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "RANK_ID", "RANK_SIZE", "HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT")
    }
    for fw, dtype, hint in (
        ("torch", "torch.float32", "init_process_group"),
        ("mindspore", "mindspore.float32", "msrun"),
    ):
        code = (
            f"import {fw}, hyper_parallel.core.symmetric_memory as s\n"
            f"try:\n    s.empty(4, dtype={dtype})\nexcept RuntimeError as e:\n    print('ERR', e)\n"
        )
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert "ERR" in r.stdout and hint in r.stdout, r.stdout + r.stderr
    # msrun's scheduler process runs the script too; without communication.init() it is told so.
    sched = dict(env, MS_ROLE="MS_SCHED", RANK_ID="0", RANK_SIZE="2", MS_SCHED_HOST="127.0.0.1", MS_SCHED_PORT="8118")
    r = subprocess.run([sys.executable, "-c", code], env=sched, capture_output=True, text=True)
    assert "ERR" in r.stdout and "MS_ROLE=MS_SCHED" in r.stdout, r.stdout + r.stderr


# ----------------------------------------------------------------------------- MindSpore, under msrun
def _msrun(nproc, script, tmp_path, env=None, timeout=240):
    """msrun starts its scheduler and `nproc` workers; their logs are tailed to stdout."""
    e = dict(os.environ, SYMMETRIC_MEMORY_HEAP_SIZE="64m", OMP_NUM_THREADS="1", GLOG_v="3")
    e.update(env or {})
    return subprocess.run(
        [
            "msrun",
            "--worker_num",
            str(nproc),
            "--local_worker_num",
            str(nproc),
            "--master_port",
            str(free_port()),
            "--log_dir",
            str(tmp_path / "msrun_logs"),
            "--join",
            "True",
            "--cluster_time_out",
            "60",
            script,
        ],
        cwd=ROOT,
        env=e,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _worker_logs(tmp_path):
    logs = sorted((tmp_path / "msrun_logs").glob("worker_*.log"))
    return "".join(p.read_text() for p in logs)


def test_mindspore_rfc_example_put_signal_under_msrun(tmp_path):
    r = _msrun(2, os.path.join(ROOT, "examples", "mindspore", "put_signal.py"), tmp_path)
    logs = _worker_logs(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:] + logs[-3000:]
    assert "rank 1: received after the signal" in logs and "(matches rank 0)" in logs, logs[-3000:]


def test_mindspore_rfc_example_fused_all_gather_matmul_under_msrun(tmp_path):
    r = _msrun(2, os.path.join(ROOT, "examples", "mindspore", "fused_all_gather_matmul.py"), tmp_path, timeout=300)
    logs = _worker_logs(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:] + logs[-3000:]
    assert logs.count("match mindspore all_gather + matmul") == 2, logs[-3000:]


BARE_MSRUN_SCRIPT = r"""
import os, sys
import mindspore as ms
import hyper_parallel.core.symmetric_memory as symm
# No mindspore.communication.init(): the ranks come from msrun's environment alone, and the
# scheduler process (which runs this script too) has nothing to do.
if os.environ.get("MS_ROLE") == "MS_SCHED":
    sys.exit(0)
rank, world = int(os.environ["RANK_ID"]), int(os.environ["RANK_SIZE"])
t = symm.empty(world, dtype=ms.int64)
t[:] = -1
symm.barrier()
for p in range(world):
    symm.shmem_put(t, rank, ms.Tensor([rank * 10], ms.int64), 0, 1, p)
symm.barrier()
assert t.asnumpy().tolist() == [r * 10 for r in range(world)], t.asnumpy()
st = symm.debug_state()
assert st["platform"] == "mindspore" and "torch" not in sys.modules
print(f"rank {rank}: bare msrun ok, authenticated={st['config']['authenticated']}", flush=True)
symm.finalize()
"""


def test_mindspore_bare_msrun_environment_with_secret(tmp_path):
    script = tmp_path / "bare.py"
    script.write_text(BARE_MSRUN_SCRIPT)
    r = _msrun(3, str(script), tmp_path, env={"HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET": os.urandom(16).hex()})
    logs = _worker_logs(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:] + logs[-3000:]
    assert logs.count("bare msrun ok, authenticated=True") == 3, logs[-3000:]


def test_mindspore_moe_layer_example_trains_under_msrun(tmp_path):
    r = _msrun(2, os.path.join(ROOT, "examples", "mindspore", "moe_layer.py"), tmp_path, timeout=300)
    logs = _worker_logs(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:] + logs[-3000:]
    assert "moe_layer OK" in logs and logs.count("over 20 steps") == 2, logs[-3000:]
