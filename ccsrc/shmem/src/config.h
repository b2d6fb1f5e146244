// The one place configuration is read: a Config built from the environment
// at Init, overridden by InitAttr fields that are set.
#pragma once

#include <cstddef>
#include <string>

#include "hpshmem/hpshmem.h"
#include "log.h"

namespace hpshmem {

struct Config {
  size_t heap_bytes = size_t{1} << 30;  // SYMMETRIC_MEMORY_HEAP_SIZE
  double timeout_sec = 120.0;           // HYPER_PARALLEL_SHMEM_TIMEOUT_SEC
  // HYPER_PARALLEL_SHMEM_PEER_TIMEOUT_SEC: a peer on another host not heard
  // from for this long is lost (0: never declared lost for silence alone).
  double peer_timeout_sec = 10.0;
  int block_dim = 1;                     // HYPER_PARALLEL_SHMEM_BLOCK_DIM
  LogLevel log_level = LogLevel::kWarn;  // HYPER_PARALLEL_SHMEM_LOG_LEVEL
  std::string endpoint;                  // HYPER_PARALLEL_SHMEM_BOOTSTRAP_ENDPOINT
  std::string secret;                    // HYPER_PARALLEL_SHMEM_BOOTSTRAP_SECRET
  std::string job_id;                    // HYPER_PARALLEL_SHMEM_JOB_ID (endpoint path)
  std::string host_id;                   // HYPER_PARALLEL_SHMEM_HOST_ID (overrides the detected host)
  bool force_ucx = false;                // HYPER_PARALLEL_SHMEM_TRANSPORT=ucx (auto: by host)
  bool ucx_rma = false;                  // HYPER_PARALLEL_SHMEM_UCX_RMA=1: puts/gets as UCX RMA, not messages
  // HYPER_PARALLEL_SHMEM_WAIT: how a wait spends its time before it sleeps.
  // kAuto chooses by this rank's CPUs and the ranks sharing them (WaitPolicy);
  // kCustom takes wait_spin_us / wait_yield_us as given.
  enum class WaitMode { kAuto, kSpin, kYield, kCustom } wait_mode = WaitMode::kAuto;
  double wait_spin_us = 0, wait_yield_us = 0;

  // Reads the environment, then applies the set fields of `attr`.
  // Errors: kInvalidArgument naming the variable and its value.
  static Status Build(const InitAttr& attr, Config* out);
};

constexpr int kMaxBlockDim = 64;

}  // namespace hpshmem
