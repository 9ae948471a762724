package quant

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
)

// TestSupportedMatchesCodecs keeps the traits' Supported flag and the
// codec table in step.
func TestSupportedMatchesCodecs(t *testing.T) {
	for typ, tr := range traits {
		if _, ok := codecs[typ]; ok != tr.Supported {
			t.Errorf("%v: Supported = %v, codec present = %v", typ, tr.Supported, ok)
		}
	}
	for typ := range codecs {
		if _, ok := traits[typ]; !ok {
			t.Errorf("codec for %v, which has no traits", typ)
		}
	}
}

func TestActivationType(t *testing.T) {
	want := map[Type]Type{
		F32: F32, F16: F16, BF16: BF16,
		Q4_0: Q8_0, Q5_0: Q8_0, Q8_0: Q8_0, Q4_1: Q8_1, Q5_1: Q8_1,
		Q2_K: Q8_K, Q3_K: Q8_K, Q4_K: Q8_K, Q5_K: Q8_K, Q6_K: Q8_K,
		Q8_1: Q8_1, Q8_K: Q8_K, IQ4_XS: IQ4_XS, Type(99): Type(99),
	}
	for w, a := range want {
		if got := ActivationType(w); got != a {
			t.Errorf("ActivationType(%v) = %v, want %v", w, got, a)
		}
	}
}

// wantErr fails unless err is non-nil and mentions every fragment.
func wantErr(t *testing.T, what string, err error, frags ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, f := range frags {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s: error %q does not mention %q", what, err, f)
		}
	}
}

func TestErrors(t *testing.T) {
	f := make([]float32, 300)
	b := make([]byte, 1000)
	wantErr(t, "Quantize partial block", Quantize(Q4_K, f, b[:144]), "quant.Quantize(q4_k)", "300 values", "256-value blocks")
	wantErr(t, "Quantize short dst", Quantize(Q4_0, f[:64], b[:35]), "quant.Quantize(q4_0)", "35 bytes", "want 36")
	wantErr(t, "Quantize long dst", Quantize(Q4_0, f[:64], b[:37]), "37 bytes", "want 36")
	wantErr(t, "Dequantize partial block", Dequantize(Q8_0, b[:35], f[:32]), "quant.Dequantize(q8_0)", "35 bytes", "34-byte blocks")
	wantErr(t, "Dequantize dst length", Dequantize(Q8_0, b[:34], f[:31]), "dst has 31 values", "holds 32")
	wantErr(t, "Dequantize unknown", Dequantize(Type(77), b[:34], f[:32]), "ggml_type(77)", "unknown GGML type")
	h := make([]dtype.Float16, 300)
	bf := make([]dtype.BFloat16, 300)
	wantErr(t, "DequantizeF16 partial", DequantizeF16(Q6_K, b[:209], h[:256]), "quant.DequantizeF16(q6_k)", "209 bytes")
	wantErr(t, "DequantizeBF16 dst", DequantizeBF16(Q6_K, b[:210], bf[:255]), "quant.DequantizeBF16(q6_k)", "255 values")
	for _, typ := range []Type{IQ2_XXS, IQ4_NL, TQ1_0, MXFP4, NVFP4, Q1_0, I8, F64} {
		err := Quantize(typ, f[:0], b[:0])
		wantErr(t, "Quantize "+typ.String(), err, typ.String(), "no codec")
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("Quantize(%v): error %v is not ErrUnsupported", typ, err)
		}
		if !errors.Is(Dequantize(typ, b[:0], f[:0]), ErrUnsupported) {
			t.Errorf("Dequantize(%v): not ErrUnsupported", typ)
		}
		if _, err := VecDot(typ, nil, typ, nil, 0); !errors.Is(err, ErrUnsupported) {
			t.Errorf("VecDot(%v): %v, not ErrUnsupported", typ, err)
		}
	}
	// Empty rows are fine.
	if err := Quantize(Q4_K, nil, nil); err != nil {
		t.Errorf("empty Quantize: %v", err)
	}
	if err := Dequantize(Q4_K, nil, nil); err != nil {
		t.Errorf("empty Dequantize: %v", err)
	}
	if s, err := VecDot(Q4_K, nil, Q8_K, nil, 0); err != nil || s != 0 {
		t.Errorf("empty VecDot = %g, %v", s, err)
	}

	vd := func(w Type, wl int, a Type, al, n int) error {
		_, err := VecDot(w, make([]byte, wl), a, make([]byte, al), n)
		return err
	}
	wantErr(t, "VecDot wrong act", vd(Q4_0, 18, Q8_1, 36, 32), "quant.VecDot(q4_0·q8_1)", "q4_0 weights pair with q8_0")
	wantErr(t, "VecDot act-only", vd(Q8_K, 292, Q8_K, 292, 256), "q8_k is an activation format")
	wantErr(t, "VecDot act-only q8_1", vd(Q8_1, 36, Q8_1, 36, 32), "q8_1 is an activation format")
	wantErr(t, "VecDot partial block", vd(Q4_K, 144, Q8_K, 292, 300), "n = 300", "256-value blocks")
	wantErr(t, "VecDot negative n", vd(Q4_0, 0, Q8_0, 0, -32), "n = -32")
	wantErr(t, "VecDot short w", vd(Q4_0, 17, Q8_0, 34, 32), "wrow has 17 bytes, want 18")
	wantErr(t, "VecDot short a", vd(Q4_0, 18, Q8_0, 33, 32), "arow has 33 bytes, want 34")
	wantErr(t, "VecDot long a", vd(Q6_K, 210, Q8_K, 293, 256), "arow has 293 bytes, want 292")
	wantErr(t, "VecDot unknown", vd(Type(50), 0, Q8_0, 0, 0), "unknown GGML type")
	wantErr(t, "VecDot f16 with f32", vd(F16, 2, F32, 4, 1), "f16 weights pair with f16")
}

func TestParseAndRowBytes(t *testing.T) {
	for typ, tr := range traits {
		got, err := ParseType(strings.ToUpper(tr.Name))
		if err != nil || got != typ {
			t.Errorf("ParseType(%q) = %v, %v", strings.ToUpper(tr.Name), got, err)
		}
		if n, err := typ.RowBytes(int64(3 * tr.Block)); err != nil || n != int64(3*tr.Size) {
			t.Errorf("%v.RowBytes(3 blocks) = %d, %v", typ, n, err)
		}
		if tr.Block > 1 {
			if _, err := typ.RowBytes(int64(tr.Block + 1)); err == nil {
				t.Errorf("%v.RowBytes(partial block): no error", typ)
			}
		}
	}
	if _, err := ParseType("q4_3"); err == nil {
		t.Error("ParseType(q4_3): no error")
	}
}

// TestRowBytesOverflow: RowBytes refuses element counts whose byte count
// does not fit an int64, and returns the exact count (checked with big
// integers) up to the limit, for every type.
func TestRowBytesOverflow(t *testing.T) {
	if n, err := F64.RowBytes(1 << 61); err == nil || !strings.Contains(err.Error(), "f64") {
		t.Errorf("F64.RowBytes(1<<61) = %d, %v; want an error naming f64", n, err)
	}
	if n, err := F32.RowBytes(math.MaxInt64); err == nil {
		t.Errorf("F32.RowBytes(MaxInt64) = %d, want an error", n)
	}
	for typ, tr := range traits {
		block, size := int64(tr.Block), int64(tr.Size)
		// The most blocks an int64 element count can hold, then as many
		// as an int64 byte count can.
		blocks := min(math.MaxInt64/block, math.MaxInt64/size)
		n := blocks * block
		got, err := typ.RowBytes(n)
		want := new(big.Int).Mul(big.NewInt(blocks), big.NewInt(size))
		if err != nil || !want.IsInt64() || got != want.Int64() {
			t.Errorf("%v.RowBytes(%d) = %d, %v; want %v", typ, n, got, err, want)
		}
		// One block more overflows the bytes (or, where a block's bytes
		// are fewer than its values, the element count itself).
		if n > math.MaxInt64-block {
			continue
		}
		if got, err := typ.RowBytes(n + block); err == nil {
			t.Errorf("%v.RowBytes(%d) = %d, want an overflow error", typ, n+block, got)
		} else if !strings.Contains(err.Error(), "int64") {
			t.Errorf("%v.RowBytes(%d): error %q does not say what overflowed", typ, n+block, err)
		}
	}
}
