#include "ops/reduce/reduce.h"

#include <complex>
#include <cstring>
#include <string>
#include <type_traits>

#include "ops/reduce/half.h"

namespace hpshmem::ops {
namespace {

template <class T>
struct Acc {
  using type = T;
};
template <>
struct Acc<Half> {
  using type = float;
};
template <>
struct Acc<BFloat16> {
  using type = float;
};

template <class T>
typename Acc<T>::type Load(const T& v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return ToFloat(v);
  else
    return v;
}
template <class T>
T Store(typename Acc<T>::type v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return FromFloat(v, static_cast<T*>(nullptr));
  else
    return v;
}

template <class A>
struct IsComplex : std::false_type {};
template <class F>
struct IsComplex<std::complex<F>> : std::true_type {};

// Integer sums and products wrap (two's complement), as the frameworks' do.
template <class A>
A Add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <class A>
A Mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;  // no promotion to signed int
    return static_cast<A>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}
// NaN wins, as in torch.maximum / torch.minimum.
template <class A>
A Max(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return b > a ? b : a;
}
template <class A>
A Min(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return b < a ? b : a;
}

template <class A>
A Divide(A v, int64_t d) {
  if constexpr (std::is_unsigned_v<A>)
    return static_cast<A>(v / static_cast<uint64_t>(d));
  else if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<int64_t>(v) / d);
  else if constexpr (IsComplex<A>::value)
    return v / static_cast<typename A::value_type>(d);
  else
    return static_cast<A>(v / static_cast<A>(d));
}

template <ReduceOp kOp, class A>
A Combine(A a, A b) {
  if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kAvg)
    return Add(a, b);
  else if constexpr (kOp == ReduceOp::kProd)
    return Mul(a, b);
  else if constexpr (kOp == ReduceOp::kAnd)
    return static_cast<A>(a & b);
  else if constexpr (kOp == ReduceOp::kOr)
    return static_cast<A>(a | b);
  else if constexpr (kOp == ReduceOp::kXor)
    return static_cast<A>(a ^ b);
  else if constexpr (kOp == ReduceOp::kMax)
    return Max(a, b);
  else
    return Min(a, b);
}

// Block by block through an accumulator that stays in L1: `out` may be any
// one of the sources (each block is read from all before it is written), and
// half precision is widened once per element and rounded once.
template <class T, ReduceOp kOp>
void Reduce(T* out, const T* const* src, int n, size_t count, int64_t divisor) {
  using A = typename Acc<T>::type;
  constexpr size_t kBlock = 2048;
  A acc[kBlock];
  for (size_t i0 = 0; i0 < count; i0 += kBlock) {
    size_t m = count - i0 < kBlock ? count - i0 : kBlock;
    const T* s0 = src[0] + i0;
    if (n >= 2) {
      const T* s1 = src[1] + i0;
      for (size_t i = 0; i < m; ++i) acc[i] = Combine<kOp>(Load(s0[i]), Load(s1[i]));
    } else {
      for (size_t i = 0; i < m; ++i) acc[i] = Load(s0[i]);
    }
    for (int k = 2; k < n; ++k) {
      const T* s = src[k] + i0;
      for (size_t i = 0; i < m; ++i) acc[i] = Combine<kOp>(acc[i], Load(s[i]));
    }
    T* o = out + i0;
    if constexpr (kOp == ReduceOp::kAvg) {
      for (size_t i = 0; i < m; ++i) o[i] = Store<T>(Divide(acc[i], divisor));
    } else {
      for (size_t i = 0; i < m; ++i) o[i] = Store<T>(acc[i]);
    }
  }
}

template <class T>
Status ReduceTyped(void* out, const void* const* srcs, int n, size_t count, ReduceOp op, int64_t divisor) {
  auto* o = static_cast<T*>(out);
  auto* s = reinterpret_cast<const T* const*>(srcs);
  using A = typename Acc<T>::type;
  switch (op) {
    case ReduceOp::kSum:
      Reduce<T, ReduceOp::kSum>(o, s, n, count, divisor);
      return Status::OK();
    case ReduceOp::kAvg:
      Reduce<T, ReduceOp::kAvg>(o, s, n, count, divisor);
      return Status::OK();
    case ReduceOp::kProd:
      Reduce<T, ReduceOp::kProd>(o, s, n, count, divisor);
      return Status::OK();
    default:
      break;
  }
  if constexpr (!IsComplex<A>::value) {
    if (op == ReduceOp::kMax) return Reduce<T, ReduceOp::kMax>(o, s, n, count, divisor), Status::OK();
    if (op == ReduceOp::kMin) return Reduce<T, ReduceOp::kMin>(o, s, n, count, divisor), Status::OK();
  }
  if constexpr (std::is_integral_v<A>) {
    if (op == ReduceOp::kAnd) return Reduce<T, ReduceOp::kAnd>(o, s, n, count, divisor), Status::OK();
    if (op == ReduceOp::kOr) return Reduce<T, ReduceOp::kOr>(o, s, n, count, divisor), Status::OK();
    if (op == ReduceOp::kXor) return Reduce<T, ReduceOp::kXor>(o, s, n, count, divisor), Status::OK();
  }
  return CheckReducible(DType::kFloat32, op, "ReduceInto");  // names the op
}

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
    case DType::kUInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kComplex64:
      return 8;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
    case DType::kUInt16:
      return 2;
    case DType::kInt8:
    case DType::kUInt8:
      return 1;
    case DType::kLongDouble:
      return sizeof(long double);
    case DType::kComplex128:
      return 16;
  }
  return 0;
}

Status CheckReducible(DType dtype, ReduceOp op, const char* what) {
  int o = static_cast<int>(op);
  if (o < 0 || o > static_cast<int>(ReduceOp::kXor))
    return Status::InvalidArgument(std::string(what) + ": reduce op " + std::to_string(o) + " is unknown");
  bool is_int = dtype == DType::kInt8 || dtype == DType::kUInt8 || dtype == DType::kInt16 || dtype == DType::kUInt16 ||
                dtype == DType::kInt32 || dtype == DType::kUInt32 || dtype == DType::kInt64 || dtype == DType::kUInt64;
  bool is_complex = dtype == DType::kComplex64 || dtype == DType::kComplex128;
  bool bitwise = op == ReduceOp::kAnd || op == ReduceOp::kOr || op == ReduceOp::kXor;
  static const char* kOps[] = {"sum", "avg", "max", "min", "prod", "and", "or", "xor"};
  if ((bitwise && !is_int) || (is_complex && (op == ReduceOp::kMax || op == ReduceOp::kMin)))
    return Status::TypeError(std::string(what) + ": " + kOps[o] + " does not apply to dtype code " +
                             std::to_string(static_cast<int>(dtype)));
  return Status::OK();
}

Status ReduceInto(void* out, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op, int64_t divisor) {
  if (n < 1) return Status::InvalidArgument("ReduceInto: no sources");
  if (divisor < 1) return Status::InvalidArgument("ReduceInto: divisor must be >= 1");
  switch (dtype) {
    case DType::kFloat32:
      return ReduceTyped<float>(out, srcs, n, count, op, divisor);
    case DType::kFloat64:
      return ReduceTyped<double>(out, srcs, n, count, op, divisor);
    case DType::kFloat16:
      return ReduceTyped<Half>(out, srcs, n, count, op, divisor);
    case DType::kBFloat16:
      return ReduceTyped<BFloat16>(out, srcs, n, count, op, divisor);
    case DType::kInt8:
      return ReduceTyped<int8_t>(out, srcs, n, count, op, divisor);
    case DType::kUInt8:
      return ReduceTyped<uint8_t>(out, srcs, n, count, op, divisor);
    case DType::kInt16:
      return ReduceTyped<int16_t>(out, srcs, n, count, op, divisor);
    case DType::kInt32:
      return ReduceTyped<int32_t>(out, srcs, n, count, op, divisor);
    case DType::kInt64:
      return ReduceTyped<int64_t>(out, srcs, n, count, op, divisor);
    case DType::kUInt16:
      return ReduceTyped<uint16_t>(out, srcs, n, count, op, divisor);
    case DType::kUInt32:
      return ReduceTyped<uint32_t>(out, srcs, n, count, op, divisor);
    case DType::kUInt64:
      return ReduceTyped<uint64_t>(out, srcs, n, count, op, divisor);
    case DType::kLongDouble:
      return ReduceTyped<long double>(out, srcs, n, count, op, divisor);
    case DType::kComplex64:
      return ReduceTyped<std::complex<float>>(out, srcs, n, count, op, divisor);
    case DType::kComplex128:
      return ReduceTyped<std::complex<double>>(out, srcs, n, count, op, divisor);
  }
  return Status::TypeError("dtype code " + std::to_string(static_cast<int>(dtype)) + " cannot be reduced");
}

}  // namespace hpshmem::ops
