package quant

import (
	"errors"
	"fmt"
	"math"

	"github.com/loomgraph/loom/dtype"
)

// ErrUnsupported is wrapped by the errors of Quantize, Dequantize and
// VecDot for a type Loom knows the layout of but has no codec for (the
// IQ*, TQ*, MXFP4/NVFP4, Q1_0/Q2_0 and integer types).
var ErrUnsupported = errors.New("no codec for this type")

// codec is one format's row functions. The functions assume whole blocks
// and matching lengths; the exported wrappers check both.
type codec struct {
	quantize   func(src []float32, dst []byte)
	dequantize func(src []byte, dst []float32)
	// dot is the VecDot twin for this type as the weight, with act as the
	// activation type; nb counts weight blocks (elements for the floats).
	dot func(w, a []byte, nb int) float32
	act Type
}

var codecs = map[Type]codec{
	F32:  {quantizeF32, dequantizeF32, dotF32, F32},
	F16:  {quantizeF16, dequantizeF16, dotF16, F16},
	BF16: {quantizeBF16, dequantizeBF16, dotBF16, BF16},
	Q4_0: {quantizeQ4_0, dequantizeQ4_0, dotQ4_0Q8_0, Q8_0},
	Q4_1: {quantizeQ4_1, dequantizeQ4_1, dotQ4_1Q8_1, Q8_1},
	Q5_0: {quantizeQ5_0, dequantizeQ5_0, dotQ5_0Q8_0, Q8_0},
	Q5_1: {quantizeQ5_1, dequantizeQ5_1, dotQ5_1Q8_1, Q8_1},
	Q8_0: {quantizeQ8_0, dequantizeQ8_0, dotQ8_0Q8_0, Q8_0},
	Q8_1: {quantizeQ8_1, dequantizeQ8_1, nil, Q8_1},
	Q2_K: {quantizeQ2_K, dequantizeQ2_K, dotQ2_KQ8_K, Q8_K},
	Q3_K: {quantizeQ3_K, dequantizeQ3_K, dotQ3_KQ8_K, Q8_K},
	Q4_K: {quantizeQ4_K, dequantizeQ4_K, dotQ4_KQ8_K, Q8_K},
	Q5_K: {quantizeQ5_K, dequantizeQ5_K, dotQ5_KQ8_K, Q8_K},
	Q6_K: {quantizeQ6_K, dequantizeQ6_K, dotQ6_KQ8_K, Q8_K},
	Q8_K: {quantizeQ8_K, dequantizeQ8_K, nil, Q8_K},
}

// lookup returns t's traits and codec, or an error naming op and t.
func lookup(op string, t Type) (Traits, codec, error) {
	tr, ok := traits[t]
	if !ok {
		return Traits{}, codec{}, fmt.Errorf("quant.%s(%v): unknown GGML type", op, t)
	}
	c, ok := codecs[t]
	if !ok {
		return Traits{}, codec{}, fmt.Errorf("quant.%s(%v): %w", op, t, ErrUnsupported)
	}
	return tr, c, nil
}

// Quantize encodes src in format t into dst, bit-exact with GGML's
// reference quantizer for t (see the package comment). len(src) must be a
// whole number of t's blocks and len(dst) exactly the bytes they take
// (Type.RowBytes).
func Quantize(t Type, src []float32, dst []byte) error {
	tr, c, err := lookup("Quantize", t)
	if err != nil {
		return err
	}
	if len(src)%tr.Block != 0 {
		return fmt.Errorf("quant.Quantize(%v): %d values are not a whole number of %d-value blocks", t, len(src), tr.Block)
	}
	if want := len(src) / tr.Block * tr.Size; len(dst) != want {
		return fmt.Errorf("quant.Quantize(%v): dst has %d bytes, want %d for %d values", t, len(dst), want, len(src))
	}
	c.quantize(src, dst)
	return nil
}

// blocksIn checks that src is a whole number of t's blocks and that dst
// has room for exactly their values; it returns the value count.
func blocksIn(op string, t Type, tr Traits, src int, dst int) (int, error) {
	if src%tr.Size != 0 {
		return 0, fmt.Errorf("quant.%s(%v): src has %d bytes, not a whole number of %d-byte blocks", op, t, src, tr.Size)
	}
	n := src / tr.Size * tr.Block
	if dst != n {
		return 0, fmt.Errorf("quant.%s(%v): dst has %d values, src holds %d", op, t, dst, n)
	}
	return n, nil
}

// Dequantize decodes src, a whole number of t's blocks, into dst, which
// must have exactly one value per encoded value. Results are bit-equal to
// GGML's dequantize_row_<t> (f16/bf16/f32 widen exactly).
func Dequantize(t Type, src []byte, dst []float32) error {
	tr, c, err := lookup("Dequantize", t)
	if err != nil {
		return err
	}
	if _, err := blocksIn("Dequantize", t, tr, len(src), len(dst)); err != nil {
		return err
	}
	c.dequantize(src, dst)
	return nil
}

// DequantizeF16 decodes src like Dequantize and rounds each value once to
// f16 (ties to even). An F16 source is copied unchanged.
func DequantizeF16(t Type, src []byte, dst []dtype.Float16) error {
	return dequantizeHalf("DequantizeF16", t, src, len(dst), func(i int, vals []float32, raw []byte) {
		d := dst[i : i+len(vals)]
		if t == F16 {
			for k := range d {
				d[k] = dtype.Float16(le16(raw[2*k:]))
			}
			return
		}
		for k, v := range vals {
			d[k] = dtype.ToF16(v)
		}
	})
}

// DequantizeBF16 decodes src like Dequantize and rounds each value once to
// bf16 (ties to even). A BF16 source is copied unchanged.
func DequantizeBF16(t Type, src []byte, dst []dtype.BFloat16) error {
	return dequantizeHalf("DequantizeBF16", t, src, len(dst), func(i int, vals []float32, raw []byte) {
		d := dst[i : i+len(vals)]
		if t == BF16 {
			for k := range d {
				d[k] = dtype.BFloat16(le16(raw[2*k:]))
			}
			return
		}
		for k, v := range vals {
			d[k] = dtype.ToBF16(v)
		}
	})
}

// dequantizeHalf decodes a chunk of blocks at a time into a small f32
// buffer and hands each chunk to put: its first element's index, its
// values, and its source bytes (for 2-byte plain types, copied as they
// are). A call per chunk, not per value: the conversion loops inline
// (Q4_K to bf16, one core of this 2-core Xeon VM: 3.9–4.0 ns a value as
// a call a value, 1.8 now; the f32 decode alone 0.7).
func dequantizeHalf(op string, t Type, src []byte, dstLen int, put func(i int, vals []float32, raw []byte)) error {
	tr, c, err := lookup(op, t)
	if err != nil {
		return err
	}
	n, err := blocksIn(op, t, tr, len(src), dstLen)
	if err != nil {
		return err
	}
	var buf [1024]float32
	per := len(buf) / tr.Block // blocks per chunk
	for b := 0; b < n/tr.Block; b += per {
		nb := min(per, n/tr.Block-b)
		vals := buf[:nb*tr.Block]
		raw := src[b*tr.Size : (b+nb)*tr.Size]
		c.dequantize(raw, vals)
		put(b*tr.Block, vals, raw)
	}
	return nil
}

// ActivationType returns the format GGML's CPU backend quantizes the
// activations to for a dot product with weights of type t (its
// vec_dot_type): Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the
// k-quants, and the type itself for F32/F16/BF16. For the activation-only
// formats Q8_1 and Q8_K, and for types without a codec, it returns t; VecDot
// has no dot product for them.
func ActivationType(t Type) Type {
	if c, ok := codecs[t]; ok {
		return c.act
	}
	return t
}

// VecDot returns the dot product of n values: wrow in weight format w and
// arow in activation format act, which must be ActivationType(w). It
// computes what GGML's generic ggml_vec_dot_<w>_<act> computes, bit for bit
// (for F32/F16/BF16: GGML's scalar loop, float32 products summed in
// float64). n must be a whole number of w's blocks, and each row exactly
// the bytes of n values.
func VecDot(w Type, wrow []byte, act Type, arow []byte, n int) (float32, error) {
	op := func() string { return fmt.Sprintf("quant.VecDot(%v·%v)", w, act) }
	tr, c, err := lookup("VecDot", w)
	if err != nil {
		return 0, err
	}
	if c.dot == nil {
		return 0, fmt.Errorf("%s: %v is an activation format; it has no dot product as weights", op(), w)
	}
	if act != c.act {
		return 0, fmt.Errorf("%s: %v weights pair with %v activations, not %v", op(), w, c.act, act)
	}
	if n < 0 || n%tr.Block != 0 {
		return 0, fmt.Errorf("%s: n = %d is not a whole number of %d-value blocks", op(), n, tr.Block)
	}
	nb := n / tr.Block
	if want := nb * tr.Size; len(wrow) != want {
		return 0, fmt.Errorf("%s: wrow has %d bytes, want %d for n = %d", op(), len(wrow), want, n)
	}
	atr := traits[act]
	if want := n / atr.Block * atr.Size; len(arow) != want {
		return 0, fmt.Errorf("%s: arow has %d bytes, want %d for n = %d", op(), len(arow), want, n)
	}
	return c.dot(wrow, arow, nb), nil
}

// VecDotRows2 is VecDotRows against two activation rows: outA[i] is
// VecDot(row i, arowA) and outB[i] VecDot(row i, arowB), bit for bit.
// Where the CPU has a kernel that takes both (Q4_K, Q5_K, Q6_K with AVX2), each
// weight block is unpacked once for the two rows (a prompt's product:
// every weight row meets every activation row); elsewhere it is two
// VecDotRows calls.
func VecDotRows2(w Type, rows []byte, act Type, arowA, arowB []byte, n int, outA, outB []float32) error {
	if len(outB) != len(outA) {
		return fmt.Errorf("quant.VecDotRows2(%v·%v): %d and %d outputs", w, act, len(outA), len(outB))
	}
	if len(outA) == 0 {
		return nil
	}
	rb := len(rows) / len(outA)
	if rb*len(outA) != len(rows) {
		return fmt.Errorf("quant.VecDotRows2(%v·%v): %d bytes are not %d rows", w, act, len(rows), len(outA))
	}
	// The first row checks types, sizes and lengths for all of them.
	if _, err := VecDot(w, rows[:rb], act, arowA, n); err != nil {
		return err
	}
	if _, err := VecDot(w, rows[:rb], act, arowB, n); err != nil {
		return err
	}
	tr, _ := w.Traits()
	if dotRows2Prepared(w, rows, arowA, arowB, rb, n/tr.Block, outA, outB) {
		return nil
	}
	if err := VecDotRows(w, rows, act, arowA, n, outA); err != nil {
		return err
	}
	return VecDotRows(w, rows, act, arowB, n, outB)
}

// VecDotRows is VecDot of every row of w (rows of rowBytes bytes, the
// weight rows of an n-value product one after another) against arow, into
// out[i] for row i: the same values, bit for bit. Where the CPU has a
// two-row kernel for w's type (Q4_0 with AVX2), rows go through it in
// pairs: the two rows' dependent float additions overlap, which a row at a
// time cannot do without changing the twin's order. arow is laid out for
// the kernel once (prepQ4_0Y2; with AVX-512, the four-row kernel's
// prepQ4_0Y512).
func VecDotRows(w Type, rows []byte, act Type, arow []byte, n int, out []float32) error {
	if len(out) == 0 {
		return nil
	}
	rb := len(rows) / len(out)
	if rb*len(out) != len(rows) {
		return fmt.Errorf("quant.VecDotRows(%v·%v): %d bytes are not %d rows", w, act, len(rows), len(out))
	}
	// The first row checks types, sizes and lengths for all of them.
	v, err := VecDot(w, rows[:rb], act, arow, n)
	if err != nil {
		return err
	}
	out[0] = v
	tr, _ := w.Traits()
	nb := n / tr.Block
	i := 1
	if j, ok := dotRowsPrepared(w, rows, arow, rb, nb, i, out); ok {
		i = j
	} else if f, ok := asmDots2[w]; ok && hasDotAVX2 {
		for ; i+1 < len(out); i += 2 {
			out[i], out[i+1] = f(rows[i*rb:(i+1)*rb], rows[(i+1)*rb:(i+2)*rb], arow, nb)
		}
	}
	dot := codecs[w].dot
	for ; i < len(out); i++ {
		out[i] = dot(rows[i*rb:(i+1)*rb], arow, nb)
	}
	return nil
}

// Plain float "codecs", so callers can treat every supported type alike.
// F16 and BF16 round to nearest even exactly as GGML's
// ggml_fp32_to_fp16_row and ggml_fp32_to_bf16_row_ref do.

func quantizeF32(src []float32, dst []byte) {
	for i, v := range src {
		put32(dst[4*i:], math.Float32bits(v))
	}
}

func dequantizeF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(le32(src[4*i:]))
	}
}

func quantizeF16(src []float32, dst []byte) {
	for i, v := range src {
		put16(dst[2*i:], f16(v))
	}
}

func dequantizeF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = lef16(src[2*i:])
	}
}

func quantizeBF16(src []float32, dst []byte) {
	for i, v := range src {
		put16(dst[2*i:], uint16(dtype.ToBF16(v)))
	}
}

func dequantizeBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(le16(src[2*i:])) << 16)
	}
}
