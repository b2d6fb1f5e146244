"""The examples and the launchers users start jobs with: torchrun and torch.multiprocessing.spawn."""
import os
import subprocess
import sys


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _torchrun(nproc, script, timeout=180):
    env = dict(os.environ, SYMMETRIC_MEMORY_HEAP_SIZE="64m", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
                           os.path.join(ROOT, "examples", script)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


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
    code = ("import hyper_parallel.platform as p; p.get_platform()")
    env = dict(os.environ, HYPER_PARALLEL_PLATFORM="tensorflow")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "HYPER_PARALLEL_PLATFORM='tensorflow' is not one of" in r.stderr, r.stderr
    env["HYPER_PARALLEL_PLATFORM"] = "mindspore"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "handler is not part of this build" in r.stderr, r.stderr
    env["HYPER_PARALLEL_PLATFORM"] = "torch"
    code = ("import hyper_parallel.core.symmetric_memory as s; print(s.debug_state()['platform'])")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "torch", r.stderr


def test_empty_without_a_process_group_says_what_to_do():
    code = ("import torch, hyper_parallel.core.symmetric_memory as s\n"
            "try:\n    s.empty(4, dtype=torch.float32)\nexcept RuntimeError as e:\n    print('ERR', e)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env.pop("HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT", None)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "ERR" in r.stdout and "init_process_group" in r.stdout, r.stdout + r.stderr
