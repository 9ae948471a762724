package codegen

import (
	"fmt"
	"math"
	"strings"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/philox"
)

// Random sources (rand, randn; ir/random.go). Element i's value is a pure
// function of the seed and the stream position offset + i, so a kernel
// computes it where it is used, from the element index, like arange. The
// prelude's helpers below are package philox's arithmetic operation for
// operation (its constants are rendered from philox's, so the two cannot
// drift apart): Philox4x32-10 on 32-bit integers, the word → [0, 1) maps,
// and Box–Muller with philox's polynomial log, sine and cosine, written
// with loom_add, loom_mul, loom_div and loom_sqrt (never contracted into
// an fma; division and square root correctly rounded), so the GPU's bits
// are the CPU's.
//
// An elementwise kernel's body takes each random instruction's standard
// variate (u in [0, 1) or z ~ N(0, 1), in the compute type) as a
// parameter, computed by the caller: in the vector path a thread's Elems
// consecutive positions cover whole Philox blocks when Elems and the
// offset are multiples of the positions per block (4 on the float32
// path, 2 on the float64 path), and the thread then computes each block
// once (one Philox call per 4 uniforms, one per 4 float32 normals);
// otherwise, and in the tail, each element computes its own block and
// takes its lane. Row kernels do the same per chunk of a row (the row
// length is a multiple of the chunk), and per element for row values.

// randPer is the number of stream positions one Philox block serves on
// dt's path.
func randPer(dt dtype.DType) int {
	if dt.Kind() == dtype.KF64 {
		return 2
	}
	return 4
}

// randSuffix names dt's path in the helpers: f32 or f64.
func randSuffix(dt dtype.DType) string {
	if dt.Kind() == dtype.KF64 {
		return "f64"
	}
	return "f32"
}

// randKind is uniform or normal.
func randKind(n *ir.Node) string {
	if n.Op == ir.OpRandNormal {
		return "normal"
	}
	return "uniform"
}

// randKey is the key words of n's seed, as C literals.
func randKey(n *ir.Node) string {
	s := n.Rand().Seed
	return fmt.Sprintf("0x%08xu, 0x%08xu", uint32(s), uint32(s>>32))
}

// randAt is the C expression of n's standard variate at the element whose
// flat index is the C expression flat (any unsigned type).
func randAt(n *ir.Node, flat string) string {
	return fmt.Sprintf("loom_rand_%s_%s((unsigned long long)(%s) + %dull, %s)", randKind(n), randSuffix(n.DType), flat, n.Rand().Offset, randKey(n))
}

// randAligned reports whether runs of v positions starting at multiples of
// v cover whole Philox blocks of n's stream.
func randAligned(n *ir.Node, v int) bool {
	per := randPer(n.DType)
	return v%per == 0 && n.Rand().Offset%uint64(per) == 0
}

// randBlocks writes, into the array rv (of Elems = v values), n's variates
// at flat indices i … i+v−1 (i a C expression, a multiple of v): whole
// blocks when they line up, one position at a time otherwise.
func randBlocks(b *w, ind int, n *ir.Node, rv, i string, v int) {
	per, off := randPer(n.DType), n.Rand().Offset
	if randAligned(n, v) {
		shift := 2
		if per == 2 {
			shift = 1
		}
		// Block q's first position, shifted: positions wrap at 2⁶⁴, so the
		// block after the last one is block 0, not the next number.
		b.line(ind, "#pragma unroll")
		b.line(ind, "for (int q = 0; q < %d; ++q) loom_rand_%s%d_%s(((unsigned long long)(%s) + %dull + (unsigned long long)(%d * q)) >> %d, %s, %s + %d * q);",
			v/per, randKind(n), per, randSuffix(n.DType), i, off, per, shift, randKey(n), rv, per)
		return
	}
	b.line(ind, "#pragma unroll")
	b.line(ind, "for (int j = 0; j < %d; ++j) %s[j] = %s;", v, rv, randAt(n, i+" + j"))
}

// randExpr is a random instruction's value (before its rounding to the
// dtype) from its standard variate v, as the CPU twin computes it:
// uniform lo + d·u, rounded to the dtype, a result ≥ hi replaced by the
// largest dtype value below hi; normal z·std + mean.
func randExpr(n *ir.Node, v string) string {
	p, dt := n.Rand(), n.DType
	if n.Op == ir.OpRandNormal {
		if dt.Kind() == dtype.KF64 {
			return fmt.Sprintf("loom_add(loom_mul(%s, %s), %s)", v, doubleLit(p.B), doubleLit(p.A))
		}
		return fmt.Sprintf("loom_add(loom_mul(%s, %s), %s)", v, floatLit(float32(p.B)), floatLit(float32(p.A)))
	}
	if dt.Kind() == dtype.KF64 {
		return fmt.Sprintf("loom_rand_fix(loom_add(%s, loom_mul(%s, %s)), %s, %s)", doubleLit(p.A), doubleLit(p.B-p.A), v, doubleLit(p.B), doubleLit(p.Top(dt)))
	}
	r := rounder(dt, fmt.Sprintf("loom_add(%s, loom_mul(%s, %s))", floatLit(float32(p.A)), floatLit(float32(p.B-p.A)), v))
	return fmt.Sprintf("loom_rand_fix(%s, %s, %s)", r, floatLit(ceil32(p.B)), floatLit(float32(p.Top(dt))))
}

// ceil32 is the smallest float32 ≥ v (the twin's): a float32 r is ≥ v
// exactly when r ≥ ceil32(v).
func ceil32(v float64) float32 {
	f := float32(v)
	if float64(f) < v {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// preludeRandom is the prelude's random number part, rendered once from
// package philox's constants.
var preludeRandom = renderPreludeRandom()

func renderPreludeRandom() string {
	c32, c64 := philox.Coeffs32(), philox.Coeffs64()
	horner := func(c []string, z string) string {
		e := c[len(c)-1]
		for k := len(c) - 2; k >= 0; k-- {
			e = fmt.Sprintf("loom_add(%s, loom_mul(%s, %s))", c[k], z, e)
		}
		return e
	}
	lits32 := func(c []float32) []string {
		var s []string
		for _, v := range c {
			s = append(s, floatLit(v))
		}
		return s
	}
	lits64 := func(c []float64) []string {
		var s []string
		for _, v := range c {
			s = append(s, doubleLit(v))
		}
		return s
	}
	r := strings.NewReplacer(
		"$M0", fmt.Sprintf("0x%08xull", philox.M0), "$M1", fmt.Sprintf("0x%08xull", philox.M1),
		"$W0", fmt.Sprintf("0x%08xu", philox.W0), "$W1", fmt.Sprintf("0x%08xu", philox.W1),
		"$ROUNDS", fmt.Sprint(philox.Rounds),
		"$LOG32", horner(lits32(c32.Log), "z"), "$SIN32", horner(lits32(c32.Sin), "z"), "$COS32", horner(lits32(c32.Cos), "z"),
		"$LN2HI32", floatLit(c32.Ln2Hi), "$LN2LO32", floatLit(c32.Ln2Lo), "$SQRT2M32", fmt.Sprintf("0x%xu", c32.Sqrt2Mant),
		"$LOG64", horner(lits64(c64.Log), "z"), "$SIN64", horner(lits64(c64.Sin), "z"), "$COS64", horner(lits64(c64.Cos), "z"),
		"$LN2HI64", doubleLit(c64.Ln2Hi), "$LN2LO64", doubleLit(c64.Ln2Lo), "$SQRT2M64", fmt.Sprintf("0x%xull", c64.Sqrt2Mant),
		"$P24", floatLit(0x1p-24), "$P22", floatLit(0x1p-22), "$P53", doubleLit(0x1p-53), "$P51", doubleLit(0x1p-51),
	)
	return r.Replace(preludeRandomTemplate)
}

// preludeRandomTemplate is the C of package philox ($NAMES are its
// constants); see philox's doc for the definitions.
const preludeRandomTemplate = `
// Random numbers (package philox). Philox4x32-10 of the counter
// (b low, b high, 0, 0) under the key (k0, k1): the block's four words.
LOOM_DEV void loom_philox(unsigned long long b, unsigned int k0, unsigned int k1, unsigned int* w) {
  unsigned int c0 = (unsigned int)b, c1 = (unsigned int)(b >> 32), c2 = 0u, c3 = 0u;
#pragma unroll
  for (int r = 0; r < $ROUNDS; ++r) {
    if (r > 0) {
      k0 += $W0;
      k1 += $W1;
    }
    const unsigned long long p0 = $M0 * c0, p1 = $M1 * c2;
    const unsigned int n0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;
    c1 = (unsigned int)p1;
    c3 = (unsigned int)p0;
    c0 = n0;
    c2 = n2;
  }
  w[0] = c0; w[1] = c1; w[2] = c2; w[3] = c3;
}

// Words to [0, 1): 24 bits for float, 53 (from two words) for double; exact.
LOOM_DEV float loom_rand_u01_f32(unsigned int w) { return loom_mul((float)(w >> 8), $P24); }
LOOM_DEV unsigned long long loom_rand_bits53(unsigned int w0, unsigned int w1) { return ((unsigned long long)(w0 >> 5) << 26) | (unsigned long long)(w1 >> 6); }
LOOM_DEV double loom_rand_u01_f64(unsigned int w0, unsigned int w1) { return loom_mul((double)loom_rand_bits53(w0, w1), $P53); }

// ln x for positive normal x (philox.Log32, Log64).
LOOM_DEV float loom_rand_log_f32(float x) {
  const unsigned int b = __float_as_uint(x), m = b & 0x7fffffu;
  int e = (int)(b >> 23) - 127;
  float f;
  if (m > $SQRT2M32) {
    f = __uint_as_float(m | 0x3f000000u);
    e += 1;
  } else {
    f = __uint_as_float(m | 0x3f800000u);
  }
  const float s = loom_div(loom_sub(f, 1.0f), loom_add(f, 1.0f));
  const float z = loom_mul(s, s);
  const float t = loom_mul(z, $LOG32);
  const float lnf = loom_add(loom_mul(2.0f, s), loom_mul(s, t));
  const float fe = (float)e;
  return loom_add(loom_mul(fe, $LN2HI32), loom_add(loom_mul(fe, $LN2LO32), lnf));
}
LOOM_DEV double loom_rand_log_f64(double x) {
  const unsigned long long b = (unsigned long long)__double_as_longlong(x), m = b & 0xfffffffffffffull;
  long long e = (long long)(b >> 52) - 1023LL;
  double f;
  if (m > $SQRT2M64) {
    f = __longlong_as_double((long long)(m | 0x3fe0000000000000ull));
    e += 1LL;
  } else {
    f = __longlong_as_double((long long)(m | 0x3ff0000000000000ull));
  }
  const double s = loom_div(loom_sub(f, 1.0), loom_add(f, 1.0));
  const double z = loom_mul(s, s);
  const double t = loom_mul(z, $LOG64);
  const double lnf = loom_add(loom_mul(2.0, s), loom_mul(s, t));
  const double fe = (double)e;
  return loom_add(loom_mul(fe, $LN2HI64), loom_add(loom_mul(fe, $LN2LO64), lnf));
}

// sin and cos of 2π·k/2^24 (2^53 for double): exact quadrant reduction in
// integers, polynomials in a = remainder/quadrant (philox.SinCos32, SinCos64).
LOOM_DEV void loom_rand_sincos_f32(unsigned int k, float* sn, float* cs) {
  k &= 0xffffffu;
  const unsigned int n = (k + 0x200000u) >> 22;
  const int j = (int)k - (int)(n << 22);
  const float a = loom_mul((float)j, $P22);
  const float z = loom_mul(a, a);
  const float s = loom_mul(a, $SIN32);
  const float c = loom_add(1.0f, loom_mul(z, $COS32));
  const unsigned int q = n & 3u;
  *sn = q == 0u ? s : q == 1u ? c : q == 2u ? -s : -c;
  *cs = q == 0u ? c : q == 1u ? -s : q == 2u ? -c : s;
}
LOOM_DEV void loom_rand_sincos_f64(unsigned long long k, double* sn, double* cs) {
  k &= 0x1fffffffffffffull;
  const unsigned long long n = (k + 0x4000000000000ull) >> 51;
  const long long j = (long long)k - (long long)(n << 51);
  const double a = loom_mul((double)j, $P51);
  const double z = loom_mul(a, a);
  const double s = loom_mul(a, $SIN64);
  const double c = loom_add(1.0, loom_mul(z, $COS64));
  const unsigned int q = (unsigned int)n & 3u;
  *sn = q == 0u ? s : q == 1u ? c : q == 2u ? -s : -c;
  *cs = q == 0u ? c : q == 1u ? -s : q == 2u ? -c : s;
}

// Box–Muller: u1 in (0, 1] from one word (two), the angle from the other(s);
// r·cos θ, r·sin θ (philox.BoxMuller32, BoxMuller64).
LOOM_DEV void loom_rand_box_muller_f32(unsigned int a, unsigned int c, float* z0, float* z1) {
  const float u1 = loom_mul((float)((a >> 8) + 1u), $P24);
  const float r = loom_sqrt(loom_mul(-2.0f, loom_rand_log_f32(u1)));
  float s, co;
  loom_rand_sincos_f32(c >> 8, &s, &co);
  *z0 = loom_mul(r, co);
  *z1 = loom_mul(r, s);
}
LOOM_DEV void loom_rand_box_muller_f64(const unsigned int* w, double* z0, double* z1) {
  const double u1 = loom_mul((double)(loom_rand_bits53(w[0], w[1]) + 1ull), $P53);
  const double r = loom_sqrt(loom_mul(-2.0, loom_rand_log_f64(u1)));
  double s, co;
  loom_rand_sincos_f64(loom_rand_bits53(w[2], w[3]), &s, &co);
  *z0 = loom_mul(r, co);
  *z1 = loom_mul(r, s);
}

// The variates of one whole block: 4 float positions, 2 double ones.
LOOM_DEV void loom_rand_uniform4_f32(unsigned long long b, unsigned int k0, unsigned int k1, float* v) {
  unsigned int w[4];
  loom_philox(b, k0, k1, w);
  v[0] = loom_rand_u01_f32(w[0]); v[1] = loom_rand_u01_f32(w[1]); v[2] = loom_rand_u01_f32(w[2]); v[3] = loom_rand_u01_f32(w[3]);
}
LOOM_DEV void loom_rand_normal4_f32(unsigned long long b, unsigned int k0, unsigned int k1, float* v) {
  unsigned int w[4];
  loom_philox(b, k0, k1, w);
  loom_rand_box_muller_f32(w[0], w[1], v, v + 1);
  loom_rand_box_muller_f32(w[2], w[3], v + 2, v + 3);
}
LOOM_DEV void loom_rand_uniform2_f64(unsigned long long b, unsigned int k0, unsigned int k1, double* v) {
  unsigned int w[4];
  loom_philox(b, k0, k1, w);
  v[0] = loom_rand_u01_f64(w[0], w[1]);
  v[1] = loom_rand_u01_f64(w[2], w[3]);
}
LOOM_DEV void loom_rand_normal2_f64(unsigned long long b, unsigned int k0, unsigned int k1, double* v) {
  unsigned int w[4];
  loom_philox(b, k0, k1, w);
  loom_rand_box_muller_f64(w, v, v + 1);
}

// The variate at stream position p (its block computed for it alone).
LOOM_DEV float loom_rand_uniform_f32(unsigned long long p, unsigned int k0, unsigned int k1) {
  unsigned int w[4];
  loom_philox(p >> 2, k0, k1, w);
  const unsigned int l = (unsigned int)p & 3u;
  return loom_rand_u01_f32(l == 0u ? w[0] : l == 1u ? w[1] : l == 2u ? w[2] : w[3]);
}
LOOM_DEV float loom_rand_normal_f32(unsigned long long p, unsigned int k0, unsigned int k1) {
  unsigned int w[4];
  loom_philox(p >> 2, k0, k1, w);
  const unsigned int l = (unsigned int)p & 3u;
  float z0, z1;
  loom_rand_box_muller_f32(l < 2u ? w[0] : w[2], l < 2u ? w[1] : w[3], &z0, &z1);
  return (l & 1u) != 0u ? z1 : z0;
}
LOOM_DEV double loom_rand_uniform_f64(unsigned long long p, unsigned int k0, unsigned int k1) {
  unsigned int w[4];
  loom_philox(p >> 1, k0, k1, w);
  const bool h = (p & 1ull) != 0ull;
  return loom_rand_u01_f64(h ? w[2] : w[0], h ? w[3] : w[1]);
}
LOOM_DEV double loom_rand_normal_f64(unsigned long long p, unsigned int k0, unsigned int k1) {
  unsigned int w[4];
  loom_philox(p >> 1, k0, k1, w);
  double z0, z1;
  loom_rand_box_muller_f64(w, &z0, &z1);
  return (p & 1ull) != 0ull ? z1 : z0;
}

// rand's rounding rule: a value rounded up to hi or beyond becomes top, the
// largest value of the dtype below hi.
LOOM_DEV float loom_rand_fix(float r, float hi, float top) { return r >= hi ? top : r; }
LOOM_DEV double loom_rand_fix(double r, double hi, double top) { return r >= hi ? top : r; }
`
