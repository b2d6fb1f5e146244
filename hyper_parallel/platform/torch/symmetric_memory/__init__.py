from hyper_parallel.platform.torch.symmetric_memory.symmetric_memory import TorchSymmetricMemoryHandler

__all__ = ["TorchSymmetricMemoryHandler"]
