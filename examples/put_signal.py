"""The RFC's quick-start example 1 (producer/consumer with put + signal), on CPU.

Only the device string differs from the RFC (and the consumer prints what it got).
Run:  torchrun --nproc-per-node 2 examples/put_signal.py
"""

import torch
import torch.distributed as dist

import hyper_parallel.core.symmetric_memory as symm

dist.init_process_group("gloo")
rank = dist.get_rank()
device = "cpu"

data_buf = symm.empty(4096, dtype=torch.float16)
signal = symm.empty(1, dtype=torch.int32)
signal.zero_()

dist.barrier()

if rank == 0:  # producer
    torch.manual_seed(0)
    local_data = torch.randn(4096, dtype=torch.float16, device=device)
    symm.shmem_put_with_signal(
        target=data_buf,
        target_offset=torch.tensor([0], dtype=torch.int64, device=device),
        src=local_data,
        src_offset=torch.tensor([0], dtype=torch.int64, device=device),
        size=torch.tensor([4096], dtype=torch.int64, device=device),
        signal=signal,
        signal_offset=torch.tensor([0], dtype=torch.int64, device=device),
        signal_value=torch.tensor([1], dtype=torch.int32, device=device),
        signal_op=0,  # SET
        target_rank=1,
    )
    print(f"rank 0: pushed 4096 float16 values, sum={local_data.float().sum().item():.4f}", flush=True)
elif rank == 1:  # consumer
    symm.shmem_wait_for_signal(
        depend_tensor=data_buf,
        signal=signal,
        signal_offset=torch.tensor([0], dtype=torch.int64, device=device),
        compare_value=torch.tensor([1], dtype=torch.int32, device=device),
        compare_op=0,  # EQ
    )
    result = data_buf.sum()  # the data is ready
    torch.manual_seed(0)
    expected = torch.randn(4096, dtype=torch.float16)
    assert torch.equal(data_buf, expected), "received data differs from what rank 0 sent"
    print(f"rank 1: received after the signal, sum={data_buf.float().sum().item():.4f} (matches rank 0)", flush=True)

dist.barrier()
symm.finalize()
dist.destroy_process_group()
