from hyper_parallel.platform.mindspore.symmetric_memory.symmetric_memory import MindSporeSymmetricMemoryHandler

__all__ = ["MindSporeSymmetricMemoryHandler"]
