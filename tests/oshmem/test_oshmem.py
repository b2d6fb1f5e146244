"""The OpenSHMEM C API as a user meets it: C programs built with ``oshcc`` / ``oshc++``
and started with ``oshrun`` on 1-4 PEs, on one host and as simulated hosts (UCX over
TCP on loopback). Each program checks its own values (see check.h) and exits non-zero
on the first wrong one; here we check exit statuses, messages and the launcher."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    path = BIN / name
    return str(path) if path.exists() else shutil.which(name) or name


ENV = dict(os.environ, HYPER_PARALLEL_SHMEM_TIMEOUT_SEC="30")
PROGRAMS = {
    "t_setup": "t_setup.c",
    "t_rma": "t_rma.c",
    "t_amo": "t_amo.c",
    "t_sync": "t_sync.c",
    "t_coll": "t_coll.c",
    "t_lock": "t_lock.c",
    "t_errors": "t_errors.c",
    "t_cxx": "t_cxx.cpp",
}


@pytest.fixture(scope="session")
def build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("oshmem")
    for exe, src in PROGRAMS.items():
        cc = tool("oshc++") if src.endswith(".cpp") else tool("oshcc")
        std = ["-std=c++17"] if src.endswith(".cpp") else ["-std=c11", "-Wpedantic"]
        cmd = [
            cc,
            *std,
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wno-unused-parameter",
            "-o",
            str(out / exe),
            str(HERE / src),
        ]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return out


def oshrun(args, timeout=240, env=ENV):
    return subprocess.run([tool("oshrun"), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)


def compile_c(tmp_path: Path, name: str, source: str) -> Path:
    """A small C program of a test, built with oshcc."""
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    exe = tmp_path / name
    subprocess.run([tool("oshcc"), "-o", str(exe), str(src)], check=True)
    return exe


def run_ok(build: Path, exe: str, np: int, *extra: str):
    r = oshrun(["-np", np, *extra, build / exe])
    assert r.returncode == 0, f"{exe} on {np} PEs {extra}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert f"OK on {np} PEs" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("np", [1, 2, 4])
def test_setup_memory_and_global_data(build, np):
    run_ok(build, "t_setup", np)


@pytest.mark.parametrize("np,extra", [(1, ()), (3, ()), (4, ()), (4, ("--hosts", "2"))])
def test_rma_every_type(build, np, extra):
    run_ok(build, "t_rma", np, *extra)


@pytest.mark.parametrize("np,extra", [(1, ()), (2, ()), (4, ()), (4, ("--hosts", "2"))])
def test_atomics_every_type(build, np, extra):
    run_ok(build, "t_amo", np, *extra)


@pytest.mark.parametrize("np,extra", [(1, ()), (2, ()), (4, ()), (4, ("--hosts", "2"))])
def test_point_to_point_sync_and_signals(build, np, extra):
    run_ok(build, "t_sync", np, *extra)


@pytest.mark.parametrize("np,extra", [(1, ()), (2, ()), (3, ()), (4, ()), (4, ("--hosts", "2")), (3, ("--hosts", "3"))])
def test_collectives_reductions_teams_active_sets(build, np, extra):
    run_ok(build, "t_coll", np, *extra)


@pytest.mark.parametrize("np,extra", [(1, ()), (4, ()), (4, ("--hosts", "2"))])
def test_locks_under_contention(build, np, extra):
    run_ok(build, "t_lock", np, *extra)


@pytest.mark.parametrize("np", [1, 3])
def test_cxx_program(build, np):
    run_ok(build, "t_cxx", np)


@pytest.mark.parametrize(
    "case,status,message",
    [
        ("bad_pe", 1, "shmem_int_p: invalid_argument: PutMem: rank 6 is out of range"),
        ("not_symmetric", 1, "shmem_int_put: invalid_argument: PutMem dest"),
        ("bad_cmp", 1, "shmem_int_wait_until: cmp 42 is not one of the SHMEM_CMP_ constants"),
        ("bad_free", 1, "shmem_free: invalid_free"),
        ("global_exit", 7, None),
        ("global_exit_zero", 0, None),
        ("exit_without_finalize", 0, None),
    ],
)
def test_errors_end_the_job_with_a_message(build, case, status, message):
    t0 = time.monotonic()
    r = oshrun(["-np", 3, build / "t_errors", case], timeout=60)
    assert r.returncode == status, f"{case}: exit {r.returncode}\n{r.stderr}"
    if message:
        assert message in r.stderr, r.stderr
    assert time.monotonic() - t0 < 30, "the job outlived the error"


def test_oshrun_reports_a_pe_killed_by_a_signal_and_ends_the_rest(build, tmp_path):
    # PE 1 is killed; the others sleep outside the library and never notice: the
    # launcher must end them and report PE 1's death (128 + SIGKILL).
    exe = compile_c(
        tmp_path,
        "die",
        "#include <shmem.h>\n#include <signal.h>\n#include <unistd.h>\n"
        "int main(void){shmem_init();shmem_barrier_all();"
        "if(shmem_my_pe()==1) kill(getpid(),SIGKILL); sleep(60); return 0;}\n",
    )
    t0 = time.monotonic()
    r = oshrun(["-np", 3, "--grace", "1", exe], timeout=60)
    assert r.returncode == 128 + signal.SIGKILL, r.stderr
    assert time.monotonic() - t0 < 30, "the other PEs were not ended"


def test_oshrun_without_shmem_init_says_so():
    r = oshrun(["-np", 2, "/bin/true"], timeout=30)
    assert r.returncode != 0 and "before it opened the rendezvous" in r.stderr, r.stderr


def test_killing_oshrun_kills_every_pe(build, tmp_path):
    exe = compile_c(
        tmp_path,
        "wait",
        "#include <shmem.h>\n#include <stdio.h>\n#include <unistd.h>\n"
        'int main(void){shmem_init();printf("pid %d\\n",(int)getpid());fflush(stdout);'
        "for(;;) sleep(1);}\n",
    )
    p = subprocess.Popen([tool("oshrun"), "-np", "3", str(exe)], stdout=subprocess.PIPE, text=True, env=ENV)
    pids = [int(p.stdout.readline().split()[1]) for _ in range(3)]
    for pid in pids:
        os.kill(pid, 0)  # all alive
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _alive(pid)]
        time.sleep(0.05)
    assert not alive, f"PEs {alive} outlived their launcher"


def test_oshrun_forwards_sigterm(build, tmp_path):
    exe = compile_c(
        tmp_path,
        "term",
        "#include <shmem.h>\n#include <signal.h>\n#include <stdio.h>\n#include <unistd.h>\n"
        "static void on(int s){(void)s;_exit(42);}\n"
        'int main(void){signal(SIGTERM,on);shmem_init();printf("up\\n");fflush(stdout);'
        "for(;;) pause();}\n",
    )
    p = subprocess.Popen([tool("oshrun"), "-np", "2", str(exe)], stdout=subprocess.PIPE, text=True, env=ENV)
    for _ in range(2):
        assert p.stdout.readline().strip() == "up"
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 42  # the PEs' own handler ran: the signal reached them


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_program_started_alone_is_one_pe(build):
    r = subprocess.run([str(build / "t_setup")], capture_output=True, text=True, timeout=60, env=ENV)
    assert r.returncode == 0 and "OK on 1 PEs" in r.stdout, r.stderr


def test_oshcc_showme_names_header_and_library():
    r = subprocess.run([tool("oshcc"), "--showme", "-o", "x", "x.c"], capture_output=True, text=True, check=True)
    words = r.stdout.split()
    inc = next(w for w in words if w.startswith("-I"))[2:]
    lib = next(w for w in words if w.startswith("-L"))[2:]
    assert (Path(inc) / "shmem.h").exists() and (Path(lib) / "libhpshmem.so").exists()
    assert "-lhpshmem" in words and any(w.startswith("-Wl,-rpath,") for w in words)
    r = subprocess.run([tool("oshcc"), "--showme", "-c", "x.c"], capture_output=True, text=True, check=True)
    assert "-lhpshmem" not in r.stdout.split()


def test_library_exports_only_the_api():
    from hyper_parallel.oshmem import library_dir

    r = subprocess.run(
        ["nm", "-D", "--defined-only", str(library_dir() / "libhpshmem.so")], capture_output=True, text=True, check=True
    )
    names = [line.split()[-1] for line in r.stdout.splitlines() if line.strip()]
    allowed = (
        "shmem_",
        "shmemx_",
        "hpshmem_ctx_default",
        "hpshmem_team_",
        "_my_pe",
        "_num_pes",
        "start_pes",
        "shmalloc",
        "shmemalign",
        "shrealloc",
        "shfree",
        "hpshmem_sync_active_set",
    )
    stray = [n for n in names if not n.startswith(allowed)]
    assert not stray, stray[:10]
    assert len(names) > 1500  # every typed routine


def test_readme_hello(build, tmp_path):
    exe = tmp_path / "hello"
    subprocess.run([tool("oshcc"), "-o", str(exe), str(ROOT / "examples/oshmem/hello.c")], check=True)
    r = oshrun(["-np", 4, exe], timeout=60)
    assert r.returncode == 0, r.stderr
    assert "sum of PE numbers: 6 (expected 6)" in r.stdout
    for pe in range(4):
        assert f'PE {pe} of 4 got "hello from PE {(pe + 3) % 4}"' in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["-np", "4", "--nnodes", "2"], "needs --master-addr"),
        (["-np", "3", "--nnodes", "2", "--master-addr", "198.18.0.1"], "not a multiple of --nnodes"),
        (["-np", "4", "--nnodes", "2", "--node-rank", "2", "--master-addr", "198.18.0.1"], "--node-rank in [0, 1]"),
        (["-np", "4", "--nnodes", "2", "--hosts", "2", "--master-addr", "198.18.0.1"], "--nnodes runs on real ones"),
        (["-np", "4", "--nnodes", "2", "--master-addr", "198.18.0.1", "--master-port", "0"], "--master-port"),
    ],
)
def test_oshrun_refuses_a_bad_multi_host_launch_before_starting_anything(args, message, tmp_path):
    marker = tmp_path / "started"
    r = subprocess.run(
        [tool("oshrun"), *args, "sh", "-c", f"touch {marker}"], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not marker.exists()
