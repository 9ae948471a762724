package codegen

import (
	"fmt"
	"strings"
)

// Prelude returns the whole helper library for t: platform macros, the
// storage conversions of f16/bf16/f8e4m3, and one device function per op and
// compute type (loom_add, loom_gelu, …) implementing the CPU twin's
// semantics. A kernel's source carries only the part of it that its body
// uses (PreludeFor, trim.go, which splits this text into items); the whole
// depends only on the target, so several kernels' Body texts can share one
// Prelude in a single translation unit.
// An invalid target yields a comment saying so (Elementwise reports the
// error).
func Prelude(t Target) string {
	t, err := t.check()
	if err != nil {
		return "// " + err.Error() + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// Loom elementwise prelude for %s.\n", t)
	if t.Platform == AMD {
		b.WriteString("#define LOOM_AMD 1\n")
	} else {
		b.WriteString("#define LOOM_NVIDIA 1\n")
	}
	fmt.Fprintf(&b, "#define LOOM_WAVE %d\n", t.WaveSize)
	b.WriteString(preludeCommon)
	if t.Platform == AMD {
		b.WriteString(preludeAMD)
	} else {
		b.WriteString(preludeNVIDIA)
	}
	b.WriteString(preludeMath)
	b.WriteString(preludeRandom)
	b.WriteString(preludeVector)
	b.WriteString(preludeRows)
	b.WriteString("// End of prelude.\n")
	return b.String()
}

// preludeCommon: integer arithmetic (wrapping, like Go's int64 and the
// CPU twin's u8/u32 rounding), comparisons, and bit-level conversions.
const preludeCommon = `
#define LOOM_DEV __device__ __forceinline__

// Canonical NaNs: the CPU twin's (Go's math.NaN(), and float32 of it).
#define LOOM_NAN_F32 __uint_as_float(0x7fc00000u)
#define LOOM_NAN_F64 __longlong_as_double(0x7ff8000000000001LL)

// Integers. i64 wraps (two's complement, through unsigned arithmetic, as
// Go's int64 does); u8 and u32 compute in unsigned int, u8 results are
// wrapped with loom_wrap_u8. Division by zero yields 0.
LOOM_DEV long long loom_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
LOOM_DEV long long loom_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
LOOM_DEV long long loom_mul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
LOOM_DEV long long loom_neg(long long a) { return (long long)(0ull - (unsigned long long)a); }
LOOM_DEV long long loom_div(long long a, long long b) { return b == 0 ? 0 : b == -1 ? loom_neg(a) : a / b; }
LOOM_DEV long long loom_max(long long a, long long b) { return a > b ? a : b; }
LOOM_DEV long long loom_min(long long a, long long b) { return a < b ? a : b; }
LOOM_DEV long long loom_sqr(long long a) { return loom_mul(a, a); }
LOOM_DEV long long loom_abs(long long a) { return a < 0 ? loom_neg(a) : a; }
LOOM_DEV long long loom_sign(long long a) { return a > 0 ? 1 : a < 0 ? -1 : 0; }
LOOM_DEV long long loom_relu(long long a) { return a < 0 ? 0 : a; }
LOOM_DEV unsigned int loom_add(unsigned int a, unsigned int b) { return a + b; }
LOOM_DEV unsigned int loom_sub(unsigned int a, unsigned int b) { return a - b; }
LOOM_DEV unsigned int loom_mul(unsigned int a, unsigned int b) { return a * b; }
LOOM_DEV unsigned int loom_div(unsigned int a, unsigned int b) { return b == 0u ? 0u : a / b; }
LOOM_DEV unsigned int loom_max(unsigned int a, unsigned int b) { return a > b ? a : b; }
LOOM_DEV unsigned int loom_min(unsigned int a, unsigned int b) { return a < b ? a : b; }
LOOM_DEV unsigned int loom_wrap_u8(unsigned int a) { return a & 0xffu; }

// Comparisons give u8 0 or 1; with a NaN only ne is true.
template <typename T> LOOM_DEV unsigned int loom_eq(T a, T b) { return a == b ? 1u : 0u; }
template <typename T> LOOM_DEV unsigned int loom_ne(T a, T b) { return a != b ? 1u : 0u; }
template <typename T> LOOM_DEV unsigned int loom_lt(T a, T b) { return a < b ? 1u : 0u; }
template <typename T> LOOM_DEV unsigned int loom_le(T a, T b) { return a <= b ? 1u : 0u; }
template <typename T> LOOM_DEV unsigned int loom_gt(T a, T b) { return a > b ? 1u : 0u; }
template <typename T> LOOM_DEV unsigned int loom_ge(T a, T b) { return a >= b ? 1u : 0u; }
template <typename C, typename T> LOOM_DEV T loom_where(C c, T a, T b) { return c != 0 ? a : b; }

// Float → integer casts: Rust ` + "`as`" + `, truncation toward zero, saturation, NaN → 0.
LOOM_DEV unsigned int loom_sat_u8(double v) { return !(v == v) ? 0u : v <= 0.0 ? 0u : v >= 255.0 ? 255u : (unsigned int)v; }
LOOM_DEV unsigned int loom_sat_u32(double v) { return !(v == v) ? 0u : v <= 0.0 ? 0u : v >= 4294967295.0 ? 4294967295u : (unsigned int)v; }
LOOM_DEV long long loom_sat_i64(double v) {
  return !(v == v) ? 0LL : v <= -9223372036854775808.0 ? (-9223372036854775807LL - 1LL) : v >= 9223372036854775808.0 ? 9223372036854775807LL : (long long)v;
}

// f64 → f32 rounding to odd (dtype.F32RoundOdd): an inexact result gets its
// last mantissa bit set, so that a later rounding to f16/bf16 equals a
// direct rounding from f64.
LOOM_DEV float loom_f32_round_odd(double v) {
  float r = (float)v;
  if ((double)r == v || !(v == v) || fabsf(r) == __uint_as_float(0x7f800000u)) return r;
  unsigned int u = __float_as_uint(r);
  if (fabs((double)r) > fabs(v)) u -= 1u; // toward zero
  return __uint_as_float(u | 1u);
}

// i64 → f32 rounding to odd, straight from the integer (the twin's
// i64RoundOdd): going through f64 would already round above 2^53.
LOOM_DEV float loom_i64_round_odd(long long v) {
  const unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
  const int n = u == 0ull ? 0 : 64 - __clzll((long long)u); // significant bits
  float f;
  if (n <= 24) {
    f = (float)u; // exact
  } else {
    const int shift = n - 24;
    unsigned long long m = u >> shift;
    if ((u & ((1ull << shift) - 1ull)) != 0ull) m |= 1ull; // sticky bit
    f = (float)m * __uint_as_float((unsigned int)(127 + shift) << 23); // m < 2^24, times 2^shift: exact
  }
  return v < 0 ? -f : f;
}

// bfloat16 is the top half of a float32: widening is exact, narrowing rounds
// to nearest even; a NaN becomes the canonical quiet NaN 0x7fc0, as in the
// CPU twin's stores (exec/cpu toBF16). NVIDIA from sm_80 narrows with
// cvt.rn.bf16(x2).f32 (round to nearest even, subnormals kept; only NaN
// needs fixing up): the integer rounding costs ~9 instructions an element,
// which held the Q4_K dequantization to bf16 (W13d) at half the copy
// bandwidth.
LOOM_DEV float loom_bf16_to_f32(unsigned short h) { return __uint_as_float((unsigned int)h << 16); }
LOOM_DEV unsigned short loom_f32_to_bf16(float f) {
#if defined(LOOM_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return f != f ? (unsigned short)0x7fc0u : h; // canonical NaN
#else
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)0x7fc0u; // canonical NaN
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}
// loom_f32x2_to_bf16x2(lo, hi): both narrowed, lo in the low half.
LOOM_DEV unsigned int loom_f32x2_to_bf16x2(float lo, float hi) {
#if defined(LOOM_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (lo == lo && hi == hi) {
    unsigned int r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
#endif
  return (unsigned int)loom_f32_to_bf16(lo) | ((unsigned int)loom_f32_to_bf16(hi) << 16);
}
LOOM_DEV float loom_round_bf16(float f) { return loom_bf16_to_f32(loom_f32_to_bf16(f)); }

// f8e4m3 (OCP E4M3FN: bias 7, no infinities, S.1111.111 is NaN, largest
// finite 448) ↔ f32 in exact integer code on every platform, the twins of
// dtype.Float8E4M3's widening and the CPU twin's store (exec/cpu toF8).
// Widening is exact, both NaN codes giving the canonical NaN. Narrowing
// rounds to nearest even (subnormals: units of 2^-9, 2^-10 and below → ±0),
// saturates what lies beyond 464 (the midpoint to the absent 480), ±inf
// included, to ±448 as Candle's float8 crate does, and turns any NaN into
// the canonical 0x7f.
LOOM_DEV float loom_f8e4m3_to_f32(unsigned char h) {
  const unsigned int s = ((unsigned int)h & 0x80u) << 24, e = ((unsigned int)h >> 3) & 0xfu, m = (unsigned int)h & 7u;
  if (((unsigned int)h & 0x7fu) == 0x7fu) return LOOM_NAN_F32;
  if (e != 0u) return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
  return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f)); // m·2^-9, exact
}
LOOM_DEV unsigned char loom_f32_to_f8e4m3(float f) {
  const unsigned int b = __float_as_uint(f), s = (b >> 24) & 0x80u, a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned char)0x7fu; // canonical NaN (the CPU twin's)
  if (a > 0x43e80000u) return (unsigned char)(s | 0x7eu); // beyond 464, inf included: ±448
  if (a >= 0x3c800000u) { // normal (≥ 2^-6): rebias 127 → 7, round 23 → 3 mantissa bits
    unsigned int v = a - 0x3c000000u;
    v += 0x7ffffu + ((v >> 20) & 1u); // a carry may reach the exponent (at most 0x7e)
    return (unsigned char)(s | (v >> 20));
  }
  if (a > 0x3a800000u) { // subnormal (> 2^-10): units of 2^-9
    const unsigned int m = (a & 0x7fffffu) | 0x800000u, sh = 141u - (a >> 23);
    unsigned int q = m >> sh;
    const unsigned int rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u);
    if (rem > half || (rem == half && (q & 1u) != 0u)) q += 1u;
    return (unsigned char)(s | q);
  }
  return (unsigned char)s;
}
LOOM_DEV float loom_round_f8e4m3(float f) { return loom_f8e4m3_to_f32(loom_f32_to_f8e4m3(f)); }
`

// preludeAMD: software f16 conversions (bit-exact ports of dtype.ToF16 and
// Float16.Float32) and plain IEEE arithmetic with contraction switched off,
// so a·b + c is never fused into an fma (the CPU twin rounds each step).
const preludeAMD = `
#pragma clang fp contract(off)

// f16 ↔ f32, exact integer code: widening is exact (any NaN becomes the
// CPU twin's 0x7fc00000); narrowing rounds to nearest even, overflows to
// infinity, and turns any NaN into the canonical quiet NaN 0x7e00 (the CPU
// twin's stores: NaN results of f16/bf16 ops are canonical).
LOOM_DEV float loom_f16_to_f32(unsigned short h) {
  unsigned int s = ((unsigned int)h & 0x8000u) << 16, e = ((unsigned int)h >> 10) & 0x1fu, m = (unsigned int)h & 0x3ffu;
  if (e == 0x1fu) return m != 0u ? LOOM_NAN_F32 : __uint_as_float(s | 0x7f800000u);
  if (e != 0u) return __uint_as_float(s | ((e + 112u) << 23) | (m << 13));
  if (m == 0u) return __uint_as_float(s);
  unsigned int p = 31u - (unsigned int)__clz((int)m); // leading bit of a subnormal, 0..9
  return __uint_as_float(s | ((p + 103u) << 23) | ((m << (23u - p)) & 0x7fffffu));
}
LOOM_DEV unsigned short loom_f32_to_f16(float f) {
  unsigned int b = __float_as_uint(f), s = (b >> 16) & 0x8000u, a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)0x7e00u; // canonical NaN (the CPU twin's)
  if (a >= 0x47800000u) return (unsigned short)(s | 0x7c00u);
  if (a >= 0x38800000u) {
    unsigned int v = a - 0x38000000u;
    v += 0xfffu + ((v >> 13) & 1u);
    return (unsigned short)(s | (v >> 13));
  }
  if (a > 0x33000000u) {
    unsigned int m = (a & 0x7fffffu) | 0x800000u, sh = 126u - (a >> 23);
    unsigned int q = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u);
    if (rem > half || (rem == half && (q & 1u) != 0u)) q += 1u;
    return (unsigned short)(s | q);
  }
  return (unsigned short)s;
}

LOOM_DEV float loom_add(float a, float b) { return a + b; }
LOOM_DEV float loom_sub(float a, float b) { return a - b; }
LOOM_DEV float loom_mul(float a, float b) { return a * b; }
LOOM_DEV float loom_div(float a, float b) { return a / b; } // correctly rounded in HIP (no fast math)
LOOM_DEV double loom_add(double a, double b) { return a + b; }
LOOM_DEV double loom_sub(double a, double b) { return a - b; }
LOOM_DEV double loom_mul(double a, double b) { return a * b; }
LOOM_DEV double loom_div(double a, double b) { return a / b; }
// v_sqrt_f32 is not correctly rounded; the f64 square root is, and
// rounding it to f32 is exact (f64 has more than 2·24+2 bits).
LOOM_DEV float loom_sqrt(float x) { return (float)sqrt((double)x); }
// Division where 2 ulp are enough and the divisor is in [1, 2^126].
LOOM_DEV float loom_div_approx(float a, float b) { return a / b; }
LOOM_DEV double loom_sqrt(double x) { return sqrt(x); }

// Every kernel Loom launches begins with loom_grid_entry() (see the
// NVIDIA prelude): AMD launches have no programmatic dependence, so it is
// empty here.
LOOM_DEV void loom_grid_entry() {}
LOOM_DEV void loom_grid_defer() {}
`

// preludeNVIDIA: hardware f16 conversions (cvt.rn is round-to-nearest-even
// with subnormals; only NaN needs fixing up to match the CPU twin) and the
// _rn intrinsics, which are never contracted into an fma whatever --fmad
// says and are IEEE-rounded whatever -prec-div/-prec-sqrt say.
const preludeNVIDIA = `
LOOM_DEV float loom_f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return ((unsigned int)h & 0x7fffu) > 0x7c00u ? LOOM_NAN_F32 : f;
}
LOOM_DEV unsigned short loom_f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return f != f ? (unsigned short)0x7e00u : h; // canonical NaN (the CPU twin's)
}

LOOM_DEV float loom_add(float a, float b) { return __fadd_rn(a, b); }
LOOM_DEV float loom_sub(float a, float b) { return __fsub_rn(a, b); }
LOOM_DEV float loom_mul(float a, float b) { return __fmul_rn(a, b); }
LOOM_DEV float loom_div(float a, float b) { return __fdiv_rn(a, b); }
LOOM_DEV double loom_add(double a, double b) { return __dadd_rn(a, b); }
LOOM_DEV double loom_sub(double a, double b) { return __dsub_rn(a, b); }
LOOM_DEV double loom_mul(double a, double b) { return __dmul_rn(a, b); }
LOOM_DEV double loom_div(double a, double b) { return __ddiv_rn(a, b); }
LOOM_DEV float loom_sqrt(float x) { return __fsqrt_rn(x); }
// Division where 2 ulp are enough and the divisor is in [1, 2^126]
// (__fdividef: a·rcp(b), 2 ulp there).
LOOM_DEV float loom_div_approx(float a, float b) { return __fdividef(a, b); }
LOOM_DEV double loom_sqrt(double x) { return __dsqrt_rn(x); }

// Programmatic dependent launch (sm_90+). Every kernel Loom launches
// begins with loom_grid_entry(), before any load or store, and the
// executor launches them with the programmatic stream serialization
// attribute (hip.Device.LaunchDep): a kernel's blocks may then be resident
// before the kernel ahead of it in the stream has finished, so its launch
// overlaps that kernel's tail instead of following it (a decode step is
// ~200 short kernels). griddepcontrol.wait holds the blocks until the
// kernel ahead has completed and its writes are visible (a no-op for a
// launch without the attribute); launch_dependents, once every block has
// passed the wait, lets the next kernel's blocks be scheduled in turn, so
// at most one kernel waits ahead of the running one. Older GPUs: nothing.
LOOM_DEV void loom_grid_entry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// loom_grid_defer() begins, instead, the few kernels that read a constant
// operand before they wait (catalog's TestKernelsWaitOnEntry lists them):
// it does nothing, and the kernel calls loom_grid_entry() itself before
// its first access to anything else. Such a kernel is launched only right
// behind a kernel of Loom's that does not write that operand: its blocks
// are scheduled once every block of that kernel has passed its own wait,
// so everything ahead of that kernel has completed.
LOOM_DEV void loom_grid_defer() {}
`

// preludeMath: float math. f16 and bf16 compute in float and round once per
// instruction (loom_round_f16/bf16); f64 in double with the vendor's libm.
// Where a float formula would lose accuracy (an exp argument that is itself
// computed, or a result in the subnormal range) the function switches to
// double for those inputs only.
const preludeMath = `
LOOM_DEV float loom_round_f16(float f) { return loom_f16_to_f32(loom_f32_to_f16(f)); }

LOOM_DEV float loom_neg(float x) { return -x; }
LOOM_DEV double loom_neg(double x) { return -x; }
LOOM_DEV float loom_sqr(float x) { return loom_mul(x, x); }
LOOM_DEV double loom_sqr(double x) { return loom_mul(x, x); }
LOOM_DEV float loom_abs(float x) { return fabsf(x); }
LOOM_DEV double loom_abs(double x) { return fabs(x); }
// sign(±0) = ±0 and sign(NaN) = NaN; relu(NaN) = NaN, relu(-0) = -0.
LOOM_DEV float loom_sign(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; }
LOOM_DEV double loom_sign(double x) { return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x; }
LOOM_DEV float loom_relu(float x) { return x < 0.0f ? 0.0f : x; }
LOOM_DEV double loom_relu(double x) { return x < 0.0 ? 0.0 : x; }
// maximum/minimum propagate NaN; otherwise the same selection as the CPU
// twin (so max(+0, -0) = -0 and min(-0, +0) = +0).
LOOM_DEV float loom_max(float a, float b) { return (a != a || b != b) ? LOOM_NAN_F32 : a > b ? a : b; }
LOOM_DEV float loom_min(float a, float b) { return (a != a || b != b) ? LOOM_NAN_F32 : a < b ? a : b; }
LOOM_DEV double loom_max(double a, double b) { return (a != a || b != b) ? LOOM_NAN_F64 : a > b ? a : b; }
LOOM_DEV double loom_min(double a, double b) { return (a != a || b != b) ? LOOM_NAN_F64 : a < b ? a : b; }

LOOM_DEV float loom_exp(float x) { return expf(x); }
LOOM_DEV double loom_exp(double x) { return exp(x); }
LOOM_DEV float loom_log(float x) { return logf(x); }
LOOM_DEV double loom_log(double x) { return log(x); }
LOOM_DEV float loom_sin(float x) { return sinf(x); }
LOOM_DEV double loom_sin(double x) { return sin(x); }
LOOM_DEV float loom_cos(float x) { return cosf(x); }
LOOM_DEV double loom_cos(double x) { return cos(x); }
LOOM_DEV float loom_tanh(float x) { return tanhf(x); }
LOOM_DEV double loom_tanh(double x) { return tanh(x); }
LOOM_DEV float loom_recip(float x) { return loom_div(1.0f, x); }
LOOM_DEV double loom_recip(double x) { return loom_div(1.0, x); }
LOOM_DEV float loom_ceil(float x) { return ceilf(x); }
LOOM_DEV double loom_ceil(double x) { return ceil(x); }
LOOM_DEV float loom_floor(float x) { return floorf(x); }
LOOM_DEV double loom_floor(double x) { return floor(x); }
LOOM_DEV float loom_round(float x) { return roundf(x); } // half away from zero
LOOM_DEV double loom_round(double x) { return round(x); }
LOOM_DEV float loom_erf(float x) { return erff(x); }
LOOM_DEV double loom_erf(double x) { return erf(x); }

// GELU, tanh form, as x·σ(2u) = x / (1 + e^(-2u)), u = √(2/π)(x + 0.044715x³)
// (no cancellation for negative x). u is computed in double like the CPU.
LOOM_DEV double loom_gelu(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  return x / (1.0 + exp(-2.0 * u));
}
// The float version computes t = -2u = C·x·(1 + a·x²) as an unevaluated sum
// th + te of floats with error-free transformations (fma and Fast2Sum;
// C = Ch + Cl and a = ah + al split likewise), which is as accurate as
// the double computation and avoids the f32↔f64 conversions and f64
// arithmetic that are slow on GPUs. Then e^t = e^th·(1 + te). Above t = 80
// the result is tiny and the double version computes it.
LOOM_DEV float loom_gelu(float x) {
  const float Ch = -1.5957692f, Cl = 4.534068e-08f, ah = 0.044715f, al = 1.5461444e-09f;
  const float x2 = loom_mul(x, x), x2e = fmaf(x, x, -x2);
  const float ax2 = loom_mul(ah, x2), ax2e = fmaf(ah, x2, -ax2);
  const float q = loom_add(1.0f, ax2);
  const float big = fmaxf(1.0f, ax2), small = fminf(1.0f, ax2);
  const float ql = loom_add(loom_sub(small, loom_sub(q, big)), fmaf(ah, x2e, fmaf(al, x2, ax2e)));
  const float p = loom_mul(x, q), pe = fmaf(x, ql, fmaf(x, q, -p));
  const float th = loom_mul(Ch, p), te = fmaf(Cl, p, fmaf(Ch, pe, fmaf(Ch, p, -th)));
  if (!(th <= 80.0f)) return (float)loom_gelu((double)x); // tiny results, NaN, -inf
  float e = expf(th);
  if (th > -100.0f) e = fmaf(e, te, e); // (te is NaN for x = +inf, where e = 0)
  return loom_div_approx(x, loom_add(1.0f, e));
}

// silu and sigmoid: the float exp is exact in its argument; below -80 the
// result is tiny (subnormal or 0) and double gets it right.
LOOM_DEV double loom_silu(double x) { return x / (1.0 + exp(-x)); }
LOOM_DEV float loom_silu(float x) {
  if (x < -80.0f) return (float)loom_silu((double)x);
  return loom_div(x, loom_add(1.0f, expf(-x)));
}
LOOM_DEV double loom_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
LOOM_DEV float loom_sigmoid(float x) {
  if (x < -80.0f) return (float)loom_sigmoid((double)x);
  return loom_div(1.0f, loom_add(1.0f, expf(-x)));
}

// Φ(x) = ½·erfc(-x/√2). erfc(t) amplifies the rounding of t by about 2t²,
// so for negative x (positive t) the float version computes in double and
// rounds once: erfcf's own error there reached 2 ulps (gelu_erf(-1.5) on an
// H200). Nothing on a hot path uses them.
LOOM_DEV double loom_normcdf(double x) { return 0.5 * erfc(-x / 1.4142135623730951); }
LOOM_DEV float loom_normcdf(float x) {
  if (x < 0.0f) return (float)loom_normcdf((double)x);
  return 0.5f * erfcf((float)(-(double)x / 1.4142135623730951));
}
// Exact GELU, x·Φ(x), in double and rounded once (x·Φ(x) in float would
// round twice).
LOOM_DEV double loom_gelu_erf(double x) { return x * loom_normcdf(x); }
LOOM_DEV float loom_gelu_erf(float x) { return (float)loom_gelu_erf((double)x); }

// elu: x for x > 0, else alpha·(e^x - 1) with expm1; alpha is the node's
// f64 parameter.
LOOM_DEV double loom_elu(double x, double alpha) { return x > 0.0 ? x : alpha * expm1(x); }
LOOM_DEV float loom_elu(float x, double alpha) { return x > 0.0f ? x : (float)(alpha * (double)expm1f(x)); }

// powf with the node's f64 exponent: in float when the exponent is a float,
// else in double.
LOOM_DEV double loom_powf(double x, double e) { return pow(x, e); }
LOOM_DEV float loom_powf(float x, float e) { return powf(x, e); }
LOOM_DEV float loom_powf(float x, double e) { return (float)pow((double)x, e); }
`

// preludeVector: 16-byte (and 8-byte u8, f8e4m3) loads and stores of consecutive
// elements, widened to / narrowed from the compute type. p must be aligned
// to the access size; the callers guarantee it.
const preludeVector = `
// Vector values are built member by member, not with make_uint4 & co., so
// that the source needs nothing beyond the builtin vector types.
LOOM_DEV void loom_st16_words(void* p, unsigned int a, unsigned int b, unsigned int c, unsigned int d) {
  uint4 w;
  w.x = a; w.y = b; w.z = c; w.w = d;
  *reinterpret_cast<uint4*>(p) = w;
}
LOOM_DEV void loom_ld16_f32(float* d, const float* p) {
  const float4 w = *reinterpret_cast<const float4*>(p);
  d[0] = w.x; d[1] = w.y; d[2] = w.z; d[3] = w.w;
}
LOOM_DEV void loom_ld16_f64(double* d, const double* p) {
  const double2 w = *reinterpret_cast<const double2*>(p);
  d[0] = w.x; d[1] = w.y;
}
LOOM_DEV void loom_ld16_i64(long long* d, const long long* p) {
  const longlong2 w = *reinterpret_cast<const longlong2*>(p);
  d[0] = w.x; d[1] = w.y;
}
LOOM_DEV void loom_ld16_u32(unsigned int* d, const unsigned int* p) {
  const uint4 w = *reinterpret_cast<const uint4*>(p);
  d[0] = w.x; d[1] = w.y; d[2] = w.z; d[3] = w.w;
}
LOOM_DEV void loom_ld16_f16(float* d, const unsigned short* p) {
  const uint4 w = *reinterpret_cast<const uint4*>(p);
  const unsigned int q[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    d[2 * k] = loom_f16_to_f32((unsigned short)(q[k] & 0xffffu));
    d[2 * k + 1] = loom_f16_to_f32((unsigned short)(q[k] >> 16));
  }
}
LOOM_DEV void loom_ld16_bf16(float* d, const unsigned short* p) {
  const uint4 w = *reinterpret_cast<const uint4*>(p);
  const unsigned int q[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    d[2 * k] = __uint_as_float(q[k] << 16);
    d[2 * k + 1] = __uint_as_float(q[k] & 0xffff0000u);
  }
}
LOOM_DEV void loom_ld16_u8(unsigned int* d, const unsigned char* p) {
  const uint4 w = *reinterpret_cast<const uint4*>(p);
  const unsigned int q[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int k = 0; k < 16; ++k) d[k] = (q[k / 4] >> (8 * (k % 4))) & 0xffu;
}
LOOM_DEV void loom_ld8_u8(unsigned int* d, const unsigned char* p) {
  const uint2 w = *reinterpret_cast<const uint2*>(p);
  const unsigned int q[2] = {w.x, w.y};
#pragma unroll
  for (int k = 0; k < 8; ++k) d[k] = (q[k / 4] >> (8 * (k % 4))) & 0xffu;
}
LOOM_DEV void loom_ld16_f8e4m3(float* d, const unsigned char* p) {
  const uint4 w = *reinterpret_cast<const uint4*>(p);
  const unsigned int q[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int k = 0; k < 16; ++k) d[k] = loom_f8e4m3_to_f32((unsigned char)(q[k / 4] >> (8 * (k % 4))));
}
LOOM_DEV void loom_ld8_f8e4m3(float* d, const unsigned char* p) {
  const uint2 w = *reinterpret_cast<const uint2*>(p);
  const unsigned int q[2] = {w.x, w.y};
#pragma unroll
  for (int k = 0; k < 8; ++k) d[k] = loom_f8e4m3_to_f32((unsigned char)(q[k / 4] >> (8 * (k % 4))));
}

LOOM_DEV void loom_st16_f32(float* p, const float* s) {
  float4 w;
  w.x = s[0]; w.y = s[1]; w.z = s[2]; w.w = s[3];
  *reinterpret_cast<float4*>(p) = w;
}
LOOM_DEV void loom_st16_f64(double* p, const double* s) {
  double2 w;
  w.x = s[0]; w.y = s[1];
  *reinterpret_cast<double2*>(p) = w;
}
LOOM_DEV void loom_st16_i64(long long* p, const long long* s) {
  longlong2 w;
  w.x = s[0]; w.y = s[1];
  *reinterpret_cast<longlong2*>(p) = w;
}
LOOM_DEV void loom_st16_u32(unsigned int* p, const unsigned int* s) {
  loom_st16_words(p, s[0], s[1], s[2], s[3]);
}
LOOM_DEV void loom_st16_f16(unsigned short* p, const float* s) {
  unsigned int q[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) q[k] = (unsigned int)loom_f32_to_f16(s[2 * k]) | ((unsigned int)loom_f32_to_f16(s[2 * k + 1]) << 16);
  loom_st16_words(p, q[0], q[1], q[2], q[3]);
}
LOOM_DEV void loom_st16_bf16(unsigned short* p, const float* s) {
  unsigned int q[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) q[k] = loom_f32x2_to_bf16x2(s[2 * k], s[2 * k + 1]);
  loom_st16_words(p, q[0], q[1], q[2], q[3]);
}
LOOM_DEV void loom_st16_u8(unsigned char* p, const unsigned int* s) {
  unsigned int q[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int k = 0; k < 16; ++k) q[k / 4] |= (s[k] & 0xffu) << (8 * (k % 4));
  loom_st16_words(p, q[0], q[1], q[2], q[3]);
}
LOOM_DEV void loom_st8_u8(unsigned char* p, const unsigned int* s) {
  unsigned int q[2] = {0u, 0u};
#pragma unroll
  for (int k = 0; k < 8; ++k) q[k / 4] |= (s[k] & 0xffu) << (8 * (k % 4));
  uint2 w;
  w.x = q[0]; w.y = q[1];
  *reinterpret_cast<uint2*>(p) = w;
}
LOOM_DEV void loom_st16_f8e4m3(unsigned char* p, const float* s) {
  unsigned int q[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int k = 0; k < 16; ++k) q[k / 4] |= (unsigned int)loom_f32_to_f8e4m3(s[k]) << (8 * (k % 4));
  loom_st16_words(p, q[0], q[1], q[2], q[3]);
}
LOOM_DEV void loom_st8_f8e4m3(unsigned char* p, const float* s) {
  unsigned int q[2] = {0u, 0u};
#pragma unroll
  for (int k = 0; k < 8; ++k) q[k / 4] |= (unsigned int)loom_f32_to_f8e4m3(s[k]) << (8 * (k % 4));
  uint2 w;
  w.x = q[0]; w.y = q[1];
  *reinterpret_cast<uint2*>(p) = w;
}
`

// preludeRows: what row kernels (rows.go) need besides the ops: wave
// shuffles of 32-bit words (wider values go as two words, which every HIP
// and CUDA version supports) and the comparison that orders (value, index)
// pairs for max, min, argmax and argmin.
const preludeRows = `
// loom_shfl_xor(v, m): the value of lane (lane ^ m) of the same wave. Every
// lane of the wave must execute it (the row kernels never diverge around
// one), and m < LOOM_WAVE.
LOOM_DEV unsigned int loom_shfl_xor(unsigned int v, int m) {
#ifdef LOOM_NVIDIA
  return __shfl_xor_sync(0xffffffffu, v, m, LOOM_WAVE);
#else
  return (unsigned int)__shfl_xor((int)v, m, LOOM_WAVE);
#endif
}
LOOM_DEV float loom_shfl_xor(float v, int m) { return __uint_as_float(loom_shfl_xor(__float_as_uint(v), m)); }
LOOM_DEV unsigned long long loom_shfl_xor(unsigned long long v, int m) {
  const unsigned int lo = loom_shfl_xor((unsigned int)v, m), hi = loom_shfl_xor((unsigned int)(v >> 32), m);
  return ((unsigned long long)hi << 32) | lo;
}
LOOM_DEV long long loom_shfl_xor(long long v, int m) { return (long long)loom_shfl_xor((unsigned long long)v, m); }
LOOM_DEV double loom_shfl_xor(double v, int m) { return __longlong_as_double(loom_shfl_xor(__double_as_longlong(v), m)); }

// loom_beats_max(a, ia, b, ib): whether the pair (a, ia) wins over (b, ib)
// in an argmax (loom_beats_min: argmin): a NaN beats every number, a
// larger (smaller) value beats a smaller (larger) one, and equal values —
// two NaNs, or +0 and -0 — go to the smaller index. This is a total order
// on pairs with distinct indices, so any combining tree picks the pair the
// CPU twin's first-index scan picks.
template <typename T, typename I> LOOM_DEV bool loom_beats_max(T a, I ia, T b, I ib) {
  if (a != a) return !(b != b) || ia < ib;
  if (b != b) return false;
  return a > b || (a == b && ia < ib);
}
template <typename T, typename I> LOOM_DEV bool loom_beats_min(T a, I ia, T b, I ib) {
  if (a != a) return !(b != b) || ia < ib;
  if (b != b) return false;
  return a < b || (a == b && ia < ib);
}
`

// Unit returns one translation unit holding several kernels' bodies for t
// behind a single prelude (the helpers every body uses, PreludeFor), so
// that one compile makes them all: the fixed cost of a runtime compile is
// paid once. Bodies must be distinct: each defines its entry points and a
// namespace named after its kernel, which a duplicate would redefine.
func Unit(t Target, bodies ...string) string {
	all := strings.Join(bodies, "")
	return PreludeFor(t, all) + all
}
