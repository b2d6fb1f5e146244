#include "multirank.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

namespace hptest {

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

bool JobResult::AllOk() const {
  if (timed_out) return false;
  for (int c : exit_code)
    if (c != 0) return false;
  return true;
}

std::string JobResult::Describe() const {
  std::string s = timed_out ? "job timed out; " : "";
  for (size_t r = 0; r < exit_code.size(); ++r) {
    s += "rank " + std::to_string(r) + ": ";
    s += term_signal[r] ? "signal " + std::to_string(term_signal[r]) : "exit " + std::to_string(exit_code[r]);
    s += "; ";
  }
  return s;
}

void FailRank(const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "[rank %d] %s:%d: %s\n", hpshmem::MyPe(), file, line, msg.c_str());
  std::fflush(stderr);
  _exit(1);
}

std::string Layout() {
  const char* l = std::getenv("HPSHMEM_TEST_LAYOUT");
  return l && *l ? l : "shm";
}

std::vector<std::pair<std::string, std::string>> LayoutEnv(int rank, int nranks) {
  std::string layout = Layout();
  if (layout == "shm") return {};
  // UCX over TCP, on loopback only.
  std::vector<std::pair<std::string, std::string>> env = {{"UCX_TLS", "tcp,self"}, {"UCX_NET_DEVICES", "lo"}};
  if (layout == "hosts") {
    env.emplace_back("HYPER_PARALLEL_SHMEM_HOST_ID", "host" + std::to_string(rank * 2 / nranks));
  } else if (layout == "ucx") {
    env.emplace_back("HYPER_PARALLEL_SHMEM_TRANSPORT", "ucx");
  } else {
    std::fprintf(stderr, "HPSHMEM_TEST_LAYOUT='%s' is not shm, hosts or ucx\n", layout.c_str());
    std::abort();
  }
  return env;
}

namespace {

bool ReadFull(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

[[noreturn]] void ChildMain(int rank, int nranks, int up_fd, int down_fd, const std::function<void(int, int)>& body,
                            const JobOptions& opts) {
  for (auto& [k, v] : LayoutEnv(rank, nranks)) setenv(k.c_str(), v.c_str(), 1);
  for (auto& [k, v] : opts.env) setenv(k.c_str(), v.c_str(), 1);
  if (opts.before_init) opts.before_init(rank, nranks);
  if (!opts.init) {
    body(rank, nranks);
    _exit(0);
  }
  hpshmem::UniqueId uid;
  if (rank == 0) {
    RCHECK_OK(hpshmem::GetUniqueId(&uid));
    if (write(up_fd, &uid, sizeof uid) != sizeof uid) _exit(3);
  } else if (!ReadFull(down_fd, &uid, sizeof uid)) {
    _exit(4);
  }
  hpshmem::InitAttr attr;
  attr.rank = rank;
  attr.nranks = nranks;
  attr.unique_id = &uid;
  attr.heap_bytes = opts.heap_bytes;
  attr.timeout_sec = opts.timeout_sec;
  hpshmem::Status st = hpshmem::Init(attr);
  if (opts.on_init_status) {
    opts.on_init_status(rank, st);
    if (!st.ok()) _exit(0);
  }
  RCHECK_OK(st);
  body(rank, nranks);
  if (opts.finalize) RCHECK_OK(hpshmem::Finalize());
  _exit(0);
}

}  // namespace

JobResult RunJob(int nranks, const std::function<void(int, int)>& body, JobOptions opts) {
  auto t0 = std::chrono::steady_clock::now();
  int spawn = opts.spawn < 0 ? nranks : opts.spawn;
  JobResult res;
  res.exit_code.assign(spawn, -1);
  res.term_signal.assign(spawn, 0);
  int up[2];
  if (pipe(up) != 0) return res;
  std::vector<pid_t> pids(spawn, -1);
  std::vector<int> down_w(spawn, -1);
  std::fflush(nullptr);
  for (int r = 0; r < spawn; ++r) {
    int down[2];
    if (pipe(down) != 0) return res;
    pid_t pid = fork();
    if (pid == 0) {
      close(up[0]);
      close(down[1]);
      ChildMain(r, nranks, up[1], down[0], body, opts);
    }
    close(down[0]);
    down_w[r] = down[1];
    pids[r] = pid;
  }
  close(up[1]);
  if (opts.init && spawn > 0) {
    hpshmem::UniqueId uid;
    pollfd p{up[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(opts.job_timeout_sec * 1000)) == 1 && ReadFull(up[0], &uid, sizeof uid)) {
      if (opts.on_unique_id) opts.on_unique_id(uid);
      for (int r = 1; r < spawn; ++r) {
        ssize_t w = write(down_w[r], &uid, sizeof uid);
        (void)w;
      }
    }
  }
  close(up[0]);
  for (int fd : down_w) close(fd);
  auto deadline = t0 + std::chrono::duration<double>(opts.job_timeout_sec);
  int left = spawn;
  while (left > 0) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < spawn; ++r) {
        if (pids[r] != pid) continue;
        if (WIFEXITED(status)) res.exit_code[r] = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) res.term_signal[r] = WTERMSIG(status);
        pids[r] = -1;
        --left;
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      res.timed_out = true;
      // Stopped first: a rank still running could see another's death and
      // exit on its own before its SIGKILL arrives.
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGSTOP);
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
      deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::vector<std::string> LeftoverNames() {
  std::vector<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back("/dev/shm/" + n);
    }
    closedir(d);
  }
  std::ifstream f("/proc/net/unix");
  std::string line;
  while (std::getline(f, line)) {
    if (line.find("@hpshmem/") != std::string::npos) out.push_back(line.substr(line.find('@')));
  }
  return out;
}

}  // namespace hptest
