"""One rank of a fault test on two real hosts (tests/python/realhosts.py), started by torchrun, or
directly with ``FAULT_BACKEND=none`` (the library's own bootstrap endpoint, no torch.distributed).

Runs rounds of a barrier, a checked allgather of `SIZE` floats, a checked ``dist.all_reduce`` on the
``hpshmem`` backend and a put-with-signal ring until `ROUNDS` are done or an operation fails.
Writes its pid to `<DIR>/ready.<rank>` after the first rounds so the test knows when to strike, and
prints one line at the end that the test parses:
``RESULT rank=<r> ok rounds=<n>`` or ``RESULT rank=<r> error after <s> s: <Type>: <message>``.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

import hyper_parallel.core.symmetric_memory as symm

MODE = os.environ.get("FAULT_MODE", "loop")
ROUNDS = int(os.environ.get("FAULT_ROUNDS", "100000000"))
SIZE = int(os.environ.get("FAULT_SIZE", "1021"))
DIR = os.environ["FAULT_DIR"]

BACKEND = os.environ.get("FAULT_BACKEND", "hpshmem")
rank = int(os.environ["RANK"])
t0 = time.monotonic()


def run():
    global t0
    if BACKEND == "none":  # ranks from RANK / WORLD_SIZE, the bootstrap at HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT
        world = int(os.environ["WORLD_SIZE"])
    else:
        dist.init_process_group(BACKEND)
        world = dist.get_world_size()
    inbox = symm.empty(SIZE, dtype=torch.float32)
    gathered = symm.empty(world * SIZE, dtype=torch.float32)
    flag = symm.empty(1, dtype=torch.int64)
    flag.zero_()
    symm.barrier()
    right, left = (rank + 1) % world, (rank - 1) % world
    done = 0
    while done < ROUNDS:
        symm.barrier()
        x = torch.arange(SIZE, dtype=torch.float32) + rank * 1e4 + done
        gathered.fill_(-1.0)
        symm.shmem_allgather(gathered, x)
        want = torch.cat([torch.arange(SIZE, dtype=torch.float32) + r * 1e4 + done for r in range(world)])
        if not torch.equal(gathered, want):
            raise AssertionError(f"allgather of round {done} differs from the expected values")
        if BACKEND == "hpshmem":  # the torch.distributed backend on the same connections
            t = torch.full((7,), float(rank + done))
            dist.all_reduce(t)
            if not torch.equal(t, torch.full((7,), float(sum(range(world)) + world * done))):
                raise AssertionError(f"dist.all_reduce of round {done} differs from the expected values")
        symm.shmem_put_with_signal(inbox, 0, x, 0, SIZE, flag, 0, done + 1, "set", right)
        symm.shmem_wait_for_signal(inbox, flag, 0, done + 1, "ge")
        want = torch.arange(SIZE, dtype=torch.float32) + left * 1e4 + done
        if not torch.equal(inbox, want):
            raise AssertionError(f"ring put of round {done} from rank {left} differs from the expected values")
        done += 1
        if done == 20:
            with open(os.path.join(DIR, f"ready.{rank}"), "w") as f:
                f.write(str(os.getpid()))
            t0 = time.monotonic()
    symm.barrier()
    return done


try:
    rounds = run()
except Exception as e:  # the test reads the message
    msg = str(e).replace("\n", " | ")
    print(f"RESULT rank={rank} error after {time.monotonic() - t0:.1f} s: {type(e).__name__}: {msg}", flush=True)
    sys.exit(3)
print(f"RESULT rank={rank} ok rounds={rounds}", flush=True)
symm.finalize()
if dist.is_initialized():
    dist.destroy_process_group()
