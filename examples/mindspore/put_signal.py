"""The RFC's quick-start example 1 (producer/consumer with put + signal) in MindSpore, on CPU.

Initialised as in the RFC's MindSpore flow (section 11): ``ms.communication.init()``, then the
first ``symm.empty()`` sets the runtime up. Two things differ from the torch version, both
MindSpore-on-CPU facts: the signal is zeroed by slice assignment (the CPU build has no
in-place zero kernel) and integer arguments are ``ms.Tensor``s.
Run:  msrun --worker_num 2 --local_worker_num 2 --join True examples/mindspore/put_signal.py
"""

import mindspore as ms
import numpy as np
from mindspore.communication import get_rank, init

import hyper_parallel.core.symmetric_memory as symm

init()
rank = get_rank()

data_buf = symm.empty(4096, dtype=ms.float16)
signal = symm.empty(1, dtype=ms.int32)
signal[:] = 0

symm.barrier()

expected = ms.Tensor(np.random.default_rng(0).standard_normal(4096).astype(np.float16))
if rank == 0:  # producer
    local_data = expected
    symm.shmem_put_with_signal(
        target=data_buf,
        target_offset=ms.Tensor([0], ms.int64),
        src=local_data,
        src_offset=ms.Tensor([0], ms.int64),
        size=ms.Tensor([4096], ms.int64),
        signal=signal,
        signal_offset=ms.Tensor([0], ms.int64),
        signal_value=ms.Tensor([1], ms.int32),
        signal_op=0,  # SET
        target_rank=1,
    )
    print(f"rank 0: pushed 4096 float16 values, sum={float(local_data.astype(ms.float32).sum()):.4f}", flush=True)
elif rank == 1:  # consumer
    symm.shmem_wait_for_signal(
        depend_tensor=data_buf,
        signal=signal,
        signal_offset=ms.Tensor([0], ms.int64),
        compare_value=ms.Tensor([1], ms.int32),
        compare_op=0,  # EQ
    )
    result = data_buf.sum()  # the data is ready
    assert np.array_equal(data_buf.asnumpy(), expected.asnumpy()), "received data differs from what rank 0 sent"
    print(
        f"rank 1: received after the signal, sum={float(data_buf.astype(ms.float32).sum()):.4f} (matches rank 0)",
        flush=True,
    )

symm.barrier()
symm.finalize()
