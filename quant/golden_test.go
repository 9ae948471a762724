package quant

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/quant/internal/testvec"
)

// The golden file holds what GGML's own C code (ggml-quants.c and the
// generic vec_dot functions of ggml-cpu/quants.c, built by
// scripts/ggml-golden/gen.sh) computes for testvec's inputs. Every check
// here is exact: bytes, f32 bits, dot-product bits.

func loadGolden(t *testing.T) *testvec.Golden {
	t.Helper()
	b, err := os.ReadFile("testdata/ggml-golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g testvec.Golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if g.N != testvec.N || g.Seed != testvec.Seed {
		t.Fatalf("golden file made for n=%d seed=%#x, testvec has n=%d seed=%#x: regenerate with scripts/ggml-golden/gen.sh", g.N, g.Seed, testvec.N, testvec.Seed)
	}
	return &g
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestGoldenInputs(t *testing.T) {
	g := loadGolden(t)
	for _, c := range testvec.Inputs() {
		if got := sha(f32bytes(c.Data)); got != g.Inputs[c.Name] {
			t.Errorf("input %q changed (sha %s, golden %s): testvec changed or is not reproducible here; regenerate the golden file", c.Name, got, g.Inputs[c.Name])
		}
	}
	if got := sha(f32bytes(testvec.Activation())); got != g.Inputs["activation"] {
		t.Errorf("activation input changed")
	}
}

// TestGoldenSizes checks the type table against GGML's sizeof of every
// block struct.
func TestGoldenSizes(t *testing.T) {
	g := loadGolden(t)
	for id, bs := range g.Sizes {
		tr, ok := Type(id).Traits()
		if !ok {
			t.Errorf("GGML type %d (%d values, %d bytes) is not in the type table", id, bs[0], bs[1])
			continue
		}
		if tr.Block != bs[0] || tr.Size != bs[1] {
			t.Errorf("%v: table says %d values in %d bytes, GGML %d in %d", Type(id), tr.Block, tr.Size, bs[0], bs[1])
		}
	}
}

func TestGolden(t *testing.T) {
	g := loadGolden(t)
	inputs := map[string][]float32{"activation": testvec.Activation()}
	for _, c := range testvec.Inputs() {
		inputs[c.Name] = c.Data
	}
	// Activation rows, quantized by this package (whose quantization of
	// "activation" is itself a golden entry).
	actRows := map[Type][]byte{}
	for _, at := range []Type{Q8_0, Q8_1, Q8_K} {
		tr, _ := at.Traits()
		b := make([]byte, testvec.N/tr.Block*tr.Size)
		if err := Quantize(at, inputs["activation"], b); err != nil {
			t.Fatal(err)
		}
		actRows[at] = b
	}
	checked := map[Type]int{}
	for _, e := range g.Entries {
		typ := Type(e.Type)
		tr, ok := typ.Traits()
		if !ok || typ.String() != e.Name {
			t.Fatalf("golden type %d is %q, table says %v", e.Type, e.Name, typ)
		}
		name := e.Name + "/" + e.Input
		var q []byte
		if e.Input == "random" {
			q = testvec.Random(e.Type, testvec.N/tr.Block, 0)
		} else {
			x, ok := inputs[e.Input]
			if !ok {
				t.Fatalf("%s: no such input", name)
			}
			q = make([]byte, len(x)/tr.Block*tr.Size)
			if err := Quantize(typ, x, q); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := sha(q); got != e.Quant {
				t.Errorf("%s: Quantize differs from GGML", name)
				if want, _ := hex.DecodeString(e.FirstBlock); !bytes.Equal(q[:tr.Size], want) {
					t.Errorf("%s: block 0\n got %x\nwant %x", name, q[:tr.Size], want)
				}
				continue
			}
		}
		if e.Dequant != "" {
			d := make([]float32, len(q)/tr.Size*tr.Block)
			if err := Dequantize(typ, q, d); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := sha(f32bytes(d)); got != e.Dequant {
				t.Errorf("%s: Dequantize differs from GGML", name)
				for i, w := range e.DequantHead {
					if math.Float32bits(d[i]) != w {
						t.Errorf("%s: value %d = %g (%#08x), GGML %g (%#08x)", name, i, d[i], math.Float32bits(d[i]), math.Float32frombits(w), w)
					}
				}
			}
			checkHalves(t, name, typ, q, d)
		}
		if len(e.Dots) > 0 {
			act := Type(e.Act)
			if ActivationType(typ) != act {
				t.Errorf("%s: ActivationType = %v, GGML pairs it with %v", name, ActivationType(typ), act)
			}
			atr, _ := act.Traits()
			arow := actRows[act]
			if e.Input == "random" {
				arow = testvec.Random(e.Act, testvec.N/atr.Block, 1)
			}
			for _, dt := range e.Dots {
				got, err := VecDot(typ, q[:dt.N/tr.Block*tr.Size], act, arow[:dt.N/atr.Block*atr.Size], dt.N)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if math.Float32bits(got) != dt.Bits {
					t.Errorf("%s: VecDot over %d values = %g (%#08x), GGML %g (%#08x)", name, dt.N, got, math.Float32bits(got), math.Float32frombits(dt.Bits), dt.Bits)
				}
				// VecDot may run assembly; the Go twin must match too.
				nb := dt.N / tr.Block
				if tw := twinDots[typ](q[:nb*tr.Size], arow[:dt.N/atr.Block*atr.Size], nb); math.Float32bits(tw) != dt.Bits {
					t.Errorf("%s: Go twin over %d values = %g (%#08x), GGML %g (%#08x)", name, dt.N, tw, math.Float32bits(tw), math.Float32frombits(dt.Bits), dt.Bits)
				}
			}
		}
		checked[typ]++
	}
	for typ, c := range codecs {
		if checked[typ] == 0 {
			t.Errorf("%v: no golden entries", typ)
		}
		_ = c
	}
}

// checkHalves checks DequantizeF16/BF16 against the f32 result rounded
// once (the f32 result itself being golden).
func checkHalves(t *testing.T, name string, typ Type, q []byte, d []float32) {
	t.Helper()
	h := make([]dtype.Float16, len(d))
	b := make([]dtype.BFloat16, len(d))
	if err := DequantizeF16(typ, q, h); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := DequantizeBF16(typ, q, b); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for i, v := range d {
		wantH, wantB := dtype.ToF16(v), dtype.ToBF16(v)
		if typ == F16 {
			wantH = dtype.Float16(binary.LittleEndian.Uint16(q[2*i:]))
		}
		if typ == BF16 {
			wantB = dtype.BFloat16(binary.LittleEndian.Uint16(q[2*i:]))
		}
		if h[i] != wantH || b[i] != wantB {
			t.Fatalf("%s: value %d: f16 %#04x bf16 %#04x, want %#04x %#04x (f32 %g)", name, i, h[i], b[i], wantH, wantB, v)
		}
	}
}

// TestGoldenHalf checks the f16/bf16 conversions against GGML's on a
// sweep of f32 bit patterns (NaN and ±Inf included) and every rounding
// boundary, and the f16 widening on all 65536 patterns.
func TestGoldenHalf(t *testing.T) {
	g := loadGolden(t)
	sweep := testvec.F16Sweep()
	hb, bb := make([]byte, 2*len(sweep)), make([]byte, 2*len(sweep))
	if err := Quantize(F16, sweep, hb); err != nil {
		t.Fatal(err)
	}
	if err := Quantize(BF16, sweep, bb); err != nil {
		t.Fatal(err)
	}
	if sha(hb) != g.F16FromF32 {
		t.Error("f32 → f16 differs from GGML_FP32_TO_FP16")
	}
	if sha(bb) != g.BF16FromF32 {
		t.Error("f32 → bf16 differs from ggml_compute_fp32_to_bf16")
	}
	all := make([]byte, 2<<16)
	for i := 0; i < 1<<16; i++ {
		binary.LittleEndian.PutUint16(all[2*i:], uint16(i))
	}
	f := make([]float32, 1<<16)
	if err := Dequantize(F16, all, f); err != nil {
		t.Fatal(err)
	}
	if sha(f32bytes(f)) != g.F16ToF32 {
		t.Error("f16 → f32 differs from GGML_FP16_TO_FP32")
	}
}
