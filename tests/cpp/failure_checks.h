// Checks shared by the failure tests (failure_test.cc, chaos_test.cc): what a
// PeerDead message names, and what a job leaves behind.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bootstrap.h"
#include "multirank.h"

namespace hptest {

// Whether a PeerDead message names `rank` among the lost: "rank(s) 1, 3 exited
// ..." (one such list per cause), "rank 3 has exited ..." or "... to rank 3
// (host h): the rank exited ...".
inline bool NamesRank(const std::string& m, int rank) {
  const std::string r = std::to_string(rank);
  for (size_t at = m.find("rank(s) "); at != std::string::npos; at = m.find("rank(s) ", at + 8)) {
    size_t end = m.find_first_not_of("0123456789, ", at + 8);
    std::string list = ", " + m.substr(at + 8, end == std::string::npos ? end : end - at - 8);
    while (!list.empty() && (list.back() == ' ' || list.back() == ',')) list.pop_back();
    list += ",";
    if (list.find(", " + r + ",") != std::string::npos) return true;
  }
  return m.find("rank " + r + " has exited") != std::string::npos ||
         m.find("to rank " + r + ": the rank ") != std::string::npos ||
         m.find("to rank " + r + " (host ") != std::string::npos;
}

// Names that belong to the job with this unique id: its abstract sockets carry the job id;
// the library never creates anything in /dev/shm, so any "hpshmem" name there counts too.
// (Other jobs running on the host at the same time must not make this test fail.)
inline std::vector<std::string> LeftoversOf(const std::string& job_hex) {
  std::vector<std::string> out;
  for (const std::string& n : hptest::LeftoverNames())
    if (n.find("@hpshmem/" + job_hex + "/") != std::string::npos ||
        (n.rfind("/dev/shm/", 0) == 0 && n.find("hpshmem") != std::string::npos))
      out.push_back(n);
  return out;
}

// The kernel tears sockets down shortly after their processes are reaped, not at once:
// wait up to 3 s for the names to go, then report what is still there.
inline std::vector<std::string> LeftoversAfterGrace(const std::string& job_hex) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::vector<std::string> left;
  while (!(left = LeftoversOf(job_hex)).empty() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return left;
}

inline JobOptions RememberJob(std::string* job_hex) {
  JobOptions o;
  o.on_unique_id = [job_hex](const hpshmem::UniqueId& id) {
    hpshmem::UniqueIdFields f;
    ASSERT_TRUE(hpshmem::DecodeUniqueId(id, &f).ok());
    char b[32];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(f.job_id));
    *job_hex = b;
  };
  return o;
}

}  // namespace hptest
