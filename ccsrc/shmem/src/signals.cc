// Signal words: SET/ADD on a peer's word, put-with-signal, and waits on this
// rank's words (where every transport delivers).
#include "runtime.h"

namespace hpshmem {

bool CmpHolds(int64_t v, Cmp c, int64_t x) {
  switch (c) {
    case Cmp::kEq:
      return v == x;
    case Cmp::kNe:
      return v != x;
    case Cmp::kGt:
      return v > x;
    case Cmp::kGe:
      return v >= x;
    case Cmp::kLt:
      return v < x;
    case Cmp::kLe:
      return v <= x;
  }
  return false;
}

namespace {

bool ValidCmp(Cmp c) { return static_cast<int>(c) >= 0 && static_cast<int>(c) <= 5; }

// ValidateSignal's checks; *off receives the signal's symmetric offset.
Status CheckSignalCall(Runtime* rt, const void* sig, SignalType type, int64_t value, SignalOp op, int pe,
                       const char* what, size_t* off) {
  HPSHMEM_RETURN_IF_ERROR(CheckPe(rt, pe, what));
  HPSHMEM_RETURN_IF_ERROR(CheckSignal(rt, sig, type, what, off));
  if (op != SignalOp::kSet && op != SignalOp::kAdd)
    return Status::InvalidArgument(std::string(what) + ": signal_op " + std::to_string(static_cast<int>(op)) +
                                   " is not SET (0) or ADD (1)");
  if (type == SignalType::kInt32 && (value < INT32_MIN || value > INT32_MAX))
    return Status::InvalidArgument(std::string(what) + ": value " + std::to_string(value) +
                                   " does not fit an int32 signal");
  return Status::OK();
}

}  // namespace

Status CheckSignal(const Runtime* rt, const void* sig, SignalType type, const char* what, size_t* off) {
  if (type != SignalType::kInt32 && type != SignalType::kInt64)
    return Status::TypeError(std::string(what) + ": signal type must be int32 or int64");
  size_t w = static_cast<size_t>(type);
  HPSHMEM_RETURN_IF_ERROR(SymOffset(rt, sig, w, what, off));
  if (*off % w)
    return Status::TypeError(std::string(what) + ": signal word is not " + std::to_string(w) + "-byte aligned");
  return Status::OK();
}

const char* CmpName(Cmp c) {
  switch (c) {
    case Cmp::kEq:
      return "==";
    case Cmp::kNe:
      return "!=";
    case Cmp::kGt:
      return ">";
    case Cmp::kGe:
      return ">=";
    case Cmp::kLt:
      return "<";
    case Cmp::kLe:
      return "<=";
  }
  return "?";
}

Status ValidateSignal(const void* sig, SignalType type, int64_t value, SignalOp op, int pe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("Signal");
  size_t off;
  return CheckSignalCall(rt, sig, type, value, op, pe, "Signal", &off);
}

Status Signal(void* sig, SignalType type, int64_t value, SignalOp op, int pe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("Signal");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckSignalCall(rt, sig, type, value, op, pe, "Signal", &off));
  return rt->route[pe]->Signal(pe, kSymOffset + off, type, op, value);
}

Status AtomicFetch(void* sig, SignalType type, int64_t value, SignalOp op, int pe, int64_t* old) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("AtomicFetch");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckSignalCall(rt, sig, type, value, op, pe, "AtomicFetch", &off));
  if (!old) return Status::InvalidArgument("AtomicFetch: old is null");
  return rt->route[pe]->FetchAtomic(pe, kSymOffset + off, type, op, value, old);
}

namespace {

// Validates an atomic on rank pe's word (named `fn` in errors; ops above
// `last` refused with `ops_text`), then `go(transport, offset)`.
template <class Go>
Status CheckedAmo(const char* fn, void* target, SignalType width, AmoOp op, AmoOp last, const char* ops_text, int pe,
                  Go&& go) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit(fn);
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckPe(rt, pe, fn));
  HPSHMEM_RETURN_IF_ERROR(CheckSignal(rt, target, width, fn, &off));
  if (static_cast<int>(op) < 0 || op > last)
    return Status::InvalidArgument(std::string(fn) + ": op " + std::to_string(static_cast<int>(op)) + ops_text);
  return go(rt->route[pe], kSymOffset + off);
}

}  // namespace

Status Amo(void* target, SignalType width, AmoOp op, int64_t value, int64_t compare, int pe, int64_t* old) {
  return CheckedAmo("Amo", target, width, op, AmoOp::kFetch, " is unknown", pe,
                    [&](Transport* t, size_t off) { return t->Amo(pe, off, width, op, value, compare, old); });
}

Status AmoNbi(void* target, SignalType width, AmoOp op, int64_t value, int pe) {
  return CheckedAmo("AmoNbi", target, width, op, AmoOp::kXor, " is not one without a result (SET, ADD, AND, OR, XOR)",
                    pe, [&](Transport* t, size_t off) { return t->AmoNbi(pe, off, width, op, value); });
}

Status WaitUntil(const std::function<bool()>& ready, const std::function<std::string()>& describe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("WaitUntil");
  return WaitLoop(rt, &rt->header()->data, ready, describe);
}

Status PutMemSignal(void* dest, const void* src, size_t bytes, void* sig, SignalType type, int64_t value, SignalOp op,
                    int pe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("PutMemSignal");
  // Validate the signal and the put before anything is written.
  size_t sig_off, off;
  HPSHMEM_RETURN_IF_ERROR(CheckSignalCall(rt, sig, type, value, op, pe, "Signal", &sig_off));
  HPSHMEM_RETURN_IF_ERROR(SymOffset(rt, dest, bytes, "PutMem dest", &off));
  if (bytes && !src) return Status::InvalidArgument("PutMem: src is null");
  return rt->route[pe]->PutSignal(pe, kSymOffset + off, src, bytes, kSymOffset + sig_off, type, op, value);
}

Status SignalFetch(const void* sig, SignalType type, int64_t* out) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("SignalFetch");
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckSignal(rt, sig, type, "SignalFetch", &off));
  *out = LoadSignal(sig, type);
  return Status::OK();
}

Status SignalWaitUntil(const void* sig, SignalType type, Cmp cmp, int64_t value, int64_t* observed, const char* label,
                       int team) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("SignalWaitUntil");
  return WaitSignal(rt, sig, type, cmp, value, observed, label, TeamScope(rt, team));
}

Status SignalWaitUntilProbed(const void* sig, SignalType type, Cmp cmp, int64_t value, const char* label, int team,
                             const std::function<Status()>& probe) {
  CallScope call;
  Runtime* rt = call.rt();
  if (!rt) return NotInit("SignalWaitUntilProbed");
  return WaitSignal(rt, sig, type, cmp, value, nullptr, label, TeamScope(rt, team), &probe);
}

Status WaitSignal(Runtime* rt, const void* sig, SignalType type, Cmp cmp, int64_t value, int64_t* observed,
                  const char* label, const std::vector<uint8_t>* scope, const std::function<Status()>* probe) {
  size_t off;
  HPSHMEM_RETURN_IF_ERROR(CheckSignal(rt, sig, type, "SignalWaitUntil", &off));
  if (!ValidCmp(cmp))
    return Status::InvalidArgument("SignalWaitUntil: compare_op " + std::to_string(static_cast<int>(cmp)) +
                                   " is not one of EQ(0) GT(1) LT(2) NE(3) GE(4) LE(5)");
  if (type == SignalType::kInt32 && (value < INT32_MIN || value > INT32_MAX))
    return Status::InvalidArgument("SignalWaitUntil: compare value " + std::to_string(value) +
                                   " does not fit an int32 signal");
  int64_t last = 0;
  auto ready = [&] {
    last = LoadSignal(sig, type);
    return CmpHolds(last, cmp, value);
  };
  auto describe = [&] {
    std::string name = label ? std::string(label) : "signal at heap offset " + std::to_string(off);
    return "waiting for " + name + " (" + (type == SignalType::kInt32 ? "int32" : "int64") + ") " + CmpName(cmp) + " " +
           std::to_string(value) + ", last observed " + std::to_string(last);
  };
  Status s = WaitLoop(rt, &rt->header()->data, ready, describe, scope, probe);
  if (observed) *observed = last;
  return s;
}

}  // namespace hpshmem
