// Library setup, exit and query; memory management.
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>

#include "ops/ops.h"
#include "state.h"

struct hpshmem_team_s hpshmem_team_world;
struct hpshmem_ctx_s hpshmem_ctx_default;
shmem_team_t hpshmem_team_shared = SHMEM_TEAM_INVALID;

namespace hpshmem::oshmem {

State& S() {
  static State* s = new State();  // never destroyed: atexit and other threads may still look
  return *s;
}

void Fatal(const char* fn, const std::string& what) {
  std::fprintf(stderr, "hpshmem: PE %d: %s: %s\n", S().me, fn, what.c_str());
  shmem_global_exit(1);
  std::abort();  // not reached
}

void RequireInit(const char* fn) {
  if (!S().initialized) Fatal(fn, S().finalized ? "called after shmem_finalize" : "called before shmem_init");
}

bool ValidTeam(shmem_team_t team) { return team != SHMEM_TEAM_INVALID && team->me >= 0; }

namespace {

std::unordered_map<void*, size_t>& Sizes() {
  static auto* m = new std::unordered_map<void*, size_t>();
  return *m;
}

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int EnvInt(const char* name, int dflt) {
  const char* v = Env(name);
  if (!v) return dflt;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end || x < 0 || x > (1 << 24)) Fatal("shmem_init", std::string(name) + "='" + v + "' is not a valid count");
  return static_cast<int>(x);
}

// The main program's writable segment minus its RELRO part: .data and .bss,
// where `int x;` at file scope lives. Page-aligned; empty if none.
struct DataRange {
  uintptr_t lo = 0, hi = 0;
};
int FindData(dl_phdr_info* info, size_t, void* arg) {
  auto* r = static_cast<DataRange*>(arg);
  uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_GNU_RELRO) relro_end = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_W)) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    lo = std::max(lo & ~(page - 1), (relro_end + page - 1) & ~(page - 1));
    hi = (hi + page - 1) & ~(page - 1);
    if (hi > lo) *r = DataRange{lo, hi};
  }
  return 1;  // the first object is the program itself
}

std::string Hex(const unsigned char* b, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += d[b[i] >> 4], s += d[b[i] & 15];
  return s;
}

bool Unhex(const char* s, unsigned char* out, size_t n) {
  auto v = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  if (std::strlen(s) != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    int a = v(s[2 * i]), b = v(s[2 * i + 1]);
    if (a < 0 || b < 0) return false;
    out[i] = static_cast<unsigned char>(a << 4 | b);
  }
  return true;
}

void AtExit() {
  // A program that returns from main without shmem_finalize still leaves
  // the job in order (the specification's implicit finalize).
  if (S().initialized) shmem_finalize();
}

void InitImpl(const char* fn, int level) {
  State& s = S();
  if (s.initialized) return;
  if (s.finalized) Fatal(fn, "the library cannot be initialized again after shmem_finalize");
  InitAttr attr;
  attr.nranks = EnvInt("HYPER_PARALLEL_SHMEM_NRANKS", 1);
  attr.rank = EnvInt("HYPER_PARALLEL_SHMEM_RANK", 0);
  if (attr.nranks < 1 || attr.rank >= attr.nranks)
    Fatal(fn, "HYPER_PARALLEL_SHMEM_RANK=" + std::to_string(attr.rank) +
                  " is not below HYPER_PARALLEL_SHMEM_NRANKS=" + std::to_string(attr.nranks));
  UniqueId id{};
  if (const char* hex = Env("HYPER_PARALLEL_SHMEM_UNIQUE_ID")) {
    if (!Unhex(hex, id.bytes, kUniqueIdBytes)) Fatal(fn, "HYPER_PARALLEL_SHMEM_UNIQUE_ID is malformed");
    attr.unique_id = &id;
  } else if (attr.nranks == 1 || Env("HYPER_PARALLEL_SHMEM_UNIQUE_ID_FD")) {
    // Rank 0 under oshrun (or a program started alone): open the rendezvous
    // here and hand its description to the launcher, which starts the rest.
    if (attr.rank != 0) Fatal(fn, "only rank 0 may create the rendezvous (HYPER_PARALLEL_SHMEM_UNIQUE_ID_FD)");
    Check(GetUniqueId(&id), fn);
    attr.unique_id = &id;
    if (const char* fdtext = Env("HYPER_PARALLEL_SHMEM_UNIQUE_ID_FD")) {
      int fd = std::atoi(fdtext);
      std::string line = Hex(id.bytes, kUniqueIdBytes) + "\n";
      if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        Fatal(fn, "could not hand the rendezvous to the launcher (HYPER_PARALLEL_SHMEM_UNIQUE_ID_FD)");
      ::close(fd);
      ::unsetenv("HYPER_PARALLEL_SHMEM_UNIQUE_ID_FD");  // not for the program's own children
    }
  }
  // Global data: remotely accessible as the specification requires, by
  // mapping the program's data pages onto heap pages after Init.
  DataRange data;
  const char* sym_data = Env("HYPER_PARALLEL_SHMEM_SYMMETRIC_DATA");
  if (!sym_data || std::strcmp(sym_data, "0") != 0) dl_iterate_phdr(FindData, &data);
  size_t data_bytes = data.hi - data.lo;
  size_t heap = 0;
  if (const char* v = Env("SHMEM_SYMMETRIC_SIZE")) {
    Check(ParseByteSize(v, "SHMEM_SYMMETRIC_SIZE", &heap), fn);
  } else {
    RuntimeInfo env;
    Check(EnvironmentSettings(&env), fn);
    heap = env.heap_bytes;
  }
  // Room for the data and the layer's own blocks beside what the program asked for.
  attr.heap_bytes = heap + data_bytes + (size_t{4} << 20);
  Check(Init(attr), fn);
  s.me = MyPe();
  s.npes = NPes();
  if (data_bytes) {
    void* block = nullptr;
    Check(AlignedAlloc(static_cast<size_t>(::sysconf(_SC_PAGESIZE)), data_bytes, &block), fn);
    Check(AliasHeap(reinterpret_cast<void*>(data.lo), block, data_bytes), fn);
    s.data_heap = static_cast<uint8_t*>(block);
    s.data_lo = data.lo;
    s.data_bytes = data_bytes;
  }
  Check(GetDirectMap(&s.dm), fn);
  s.bells.assign(s.npes, nullptr);
  for (int i = 0; i < s.npes; ++i) s.bells[i] = PeerDoorbell(i);
  // Counts for collect; every member's values for a small reduction (an eager slot's worth each).
  s.scratch_bytes = std::max<size_t>(8 * static_cast<size_t>(s.npes), 32768) + 64;
  Check(Malloc(s.scratch_bytes, &s.scratch), fn);
  std::vector<int> world(s.npes);
  for (int i = 0; i < s.npes; ++i) world[i] = i;
  FillTeam(&hpshmem_team_world, kTeamWorld, world, fn);
  hpshmem_team_world.predefined = true;
  hpshmem_ctx_default.team = &hpshmem_team_world;
  hpshmem_ctx_default.is_default = true;
  std::vector<int> shared;
  for (int i = 0; i < s.npes; ++i)
    if (i == s.me || DirectlyReachable(i)) shared.push_back(i);
  if (shared.size() == world.size()) {
    hpshmem_team_shared = &hpshmem_team_world;
  } else {
    MakeTeam(shared, nullptr, 0, &hpshmem_team_shared, fn);
    hpshmem_team_shared->predefined = true;
  }
  s.thread_level = level;
  s.initialized = true;
  static bool registered = false;
  if (!registered) std::atexit(AtExit), registered = true;
  if (s.me == 0 && (Env("SHMEM_VERSION") || Env("SHMEM_INFO")))
    std::printf("OpenSHMEM %d.%d, %s\n", SHMEM_MAJOR_VERSION, SHMEM_MINOR_VERSION, SHMEM_VENDOR_STRING);
  if (s.me == 0 && Env("SHMEM_INFO")) {
    std::printf("  SHMEM_SYMMETRIC_SIZE      %zu bytes of heap (+%zu of program data)\n", heap, data_bytes);
    std::printf("  HYPER_PARALLEL_SHMEM_*    see docs/python-api.md; debug state: %s\n", DebugState().c_str());
  }
}

void* Allocated(void* p, size_t bytes) {
  if (p) {
    std::lock_guard<std::mutex> lk(S().mu);
    Sizes()[p] = bytes;
  }
  return p;
}

}  // namespace
}  // namespace hpshmem::oshmem

using namespace hpshmem;
using namespace hpshmem::oshmem;

extern "C" {

// ---------------------------------------------------------------- setup, exit, query

void shmem_init(void) { InitImpl("shmem_init", SHMEM_THREAD_SINGLE); }

int shmem_init_thread(int requested, int* provided) {
  if (requested < SHMEM_THREAD_SINGLE || requested > SHMEM_THREAD_MULTIPLE) return 1;
  // Every non-collective routine is thread-safe: whatever is asked is given.
  InitImpl("shmem_init_thread", requested);
  if (provided) *provided = requested;
  return 0;
}

void shmem_query_thread(int* provided) {
  if (provided) *provided = S().thread_level;
}

void shmem_finalize(void) {
  State& s = S();
  if (!s.initialized) return;
  Check(Quiet(), "shmem_finalize");
  Check(Barrier(), "shmem_finalize");
  // Nobody reaches this PE's data any more: give the program back private pages.
  s.initialized = false;
  s.finalized = true;
  s.dm = DirectMap{};  // every later call takes the runtime's path, which says why it fails
  if (s.data_bytes) Check(UnaliasHeap(reinterpret_cast<void*>(s.data_lo), s.data_bytes), "shmem_finalize");
  s.data_bytes = 0;
  s.data_lo = 0;
  Check(Finalize(), "shmem_finalize");
}

void shmem_global_exit(int status) {
  std::fflush(nullptr);
  // Under oshrun: the launcher ends every other PE and exits with this status.
  if (const char* fd = Env("HYPER_PARALLEL_SHMEM_EXIT_FD")) {
    std::string line = std::to_string(status) + "\n";
    [[maybe_unused]] ssize_t w = ::write(std::atoi(fd), line.data(), line.size());
  }
  // oshrun sees this status first and ends the other PEs; a peer that waits on
  // this one sees it die and ends too.
  ::_exit(status);
}

int shmem_my_pe(void) { return S().initialized ? S().me : -1; }
int shmem_n_pes(void) { return S().initialized ? S().npes : -1; }

int shmem_pe_accessible(int pe) { return S().initialized && pe >= 0 && pe < S().npes && PeerTransport(pe) != nullptr; }

int shmem_addr_accessible(const void* addr, int pe) { return shmem_pe_accessible(pe) && IsSymmetric(Sym(addr), 1); }

void* shmem_ptr(const void* dest, int pe) {
  if (!S().initialized) return nullptr;
  if (pe == S().me && IsSymmetric(Sym(dest), 1)) return const_cast<void*>(dest);
  return Ptr(Sym(dest), pe);
}

void* shmem_team_ptr(shmem_team_t team, const void* dest, int pe) {
  if (!S().initialized || !ValidTeam(team) || pe < 0 || pe >= static_cast<int>(team->pes.size())) return nullptr;
  return shmem_ptr(dest, team->pes[pe]);
}

void shmem_pcontrol(const int, ...) {}

void shmem_info_get_version(int* major, int* minor) {
  if (major) *major = SHMEM_MAJOR_VERSION;
  if (minor) *minor = SHMEM_MINOR_VERSION;
}

void shmem_info_get_name(char* name) {
  if (name) std::snprintf(name, SHMEM_MAX_NAME_LEN, "%s", SHMEM_VENDOR_STRING);
}

void start_pes(int) { shmem_init(); }
int _my_pe(void) { return shmem_my_pe(); }
int _num_pes(void) { return shmem_n_pes(); }
int shmem_initialized(void) { return S().initialized; }

// ---------------------------------------------------------------- memory management
// Collective; each ends with a barrier, as the specification requires.

void* shmem_align(size_t alignment, size_t size) {
  RequireInit("shmem_align");
  if (alignment == 0 || (alignment & (alignment - 1)))
    Fatal("shmem_align", "alignment " + std::to_string(alignment) + " is not a power of two");
  void* p = nullptr;
  if (size) {
    Status st = AlignedAlloc(std::max<size_t>(alignment, 64), size, &p);
    if (!st.ok()) {
      // Out of memory is the caller's to handle (NULL); mismatched calls are not.
      if (st.code() != Code::kOutOfMemory) Fatal("shmem_malloc", st.ToString());
      std::fprintf(stderr, "hpshmem: PE %d: shmem_malloc: %s\n", S().me, st.ToString().c_str());
      p = nullptr;
    }
  }
  Check(Barrier(), "shmem_malloc");
  return Allocated(p, size);
}

void* shmem_malloc(size_t size) { return shmem_align(64, size); }

void* shmem_malloc_with_hints(size_t size, long hints) {
  // Hints may be ignored (unknown ones too): every block already serves atomics and signals.
  (void)hints;
  return shmem_malloc(size);
}

void* shmem_calloc(size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) Fatal("shmem_calloc", "count * size overflows");
  void* p = shmem_malloc(count * size);
  if (p) std::memset(p, 0, count * size);
  Check(Barrier(), "shmem_calloc");
  return p;
}

void shmem_free(void* ptr) {
  RequireInit("shmem_free");
  if (ptr) {
    {
      std::lock_guard<std::mutex> lk(S().mu);
      Sizes().erase(ptr);
    }
    Check(Free(ptr), "shmem_free");
  }
  Check(Barrier(), "shmem_free");
}

void* shmem_realloc(void* ptr, size_t size) {
  RequireInit("shmem_realloc");
  if (!ptr) return shmem_malloc(size);
  if (size == 0) {
    shmem_free(ptr);
    return nullptr;
  }
  size_t old = 0;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    auto it = Sizes().find(ptr);
    if (it == Sizes().end()) Fatal("shmem_realloc", "the pointer was not returned by shmem_malloc");
    old = it->second;
  }
  void* p = shmem_malloc(size);
  if (!p) return nullptr;  // the old block stays, as with realloc
  std::memcpy(p, ptr, std::min(old, size));
  shmem_free(ptr);
  return p;
}

void* shmalloc(size_t size) { return shmem_malloc(size); }
void* shmemalign(size_t alignment, size_t size) { return shmem_align(alignment, size); }
void* shrealloc(void* ptr, size_t size) { return shmem_realloc(ptr, size); }
void shfree(void* ptr) { shmem_free(ptr); }

}  // extern "C"
