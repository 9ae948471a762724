package testvec

import "math"

// Golden is the content of quant/testdata/ggml-golden.json, written by
// scripts/ggml-golden from GGML's own C code and read by package quant's
// tests. Hashes are SHA-256 in hex; byte strings are hex.
type Golden struct {
	Generator  string `json:"generator"`
	GGMLCommit string `json:"ggml_commit"`
	CC         string `json:"cc"`
	CFlags     string `json:"cflags"`
	N          int    `json:"n"`
	Seed       uint64 `json:"seed"`
	// Inputs maps each input name (and "activation") to the SHA-256 of
	// its little-endian f32 bytes, so a change of the generator is
	// reported as such.
	Inputs map[string]string `json:"inputs"`
	// Sizes is GGML's [elements, bytes] per block of every type number it
	// was built with (sizeof of its block structs).
	Sizes map[uint32][2]int `json:"sizes"`
	// F16 holds the plain conversions over F16Sweep().
	F16FromF32  string  `json:"f16_from_f32_sha256"`
	BF16FromF32 string  `json:"bf16_from_f32_sha256"`
	F16ToF32    string  `json:"f16_to_f32_sha256"` // all 65536 patterns, in order
	Entries     []Entry `json:"entries"`
}

// Entry is one (type, input) pair. For Input "random" the bytes are
// Random(Type, N/block, 0) and Quant is empty; otherwise they are GGML's
// quantization of the named input.
type Entry struct {
	Type       uint32 `json:"type"`
	Name       string `json:"name"`
	Input      string `json:"input"`
	Quant      string `json:"quant_sha256,omitempty"`
	FirstBlock string `json:"first_block,omitempty"` // the quantized bytes of block 0
	Dequant    string `json:"dequant_sha256,omitempty"`
	// DequantHead is the bits of the first 8 dequantized values, to say
	// where a mismatch starts.
	DequantHead []uint32 `json:"dequant_head,omitempty"`
	// Dots are GGML's generic vec_dot of these weight bytes with the
	// activation bytes (GGML's quantization of Activation() to Act, or
	// Random(Act, N/block, 1) for "random"), over the first N values.
	Act  uint32 `json:"act,omitempty"`
	Dots []Dot  `json:"dots,omitempty"`
}

// Dot is one dot product result.
type Dot struct {
	N    int    `json:"n"`
	Bits uint32 `json:"bits"`
}

// DotLengths are the prefix lengths the golden dots use for a weight type
// of the given block size: one block, a few blocks, the whole row.
func DotLengths(block int) []int { return []int{block, 3 * block, N} }

// F16Sweep returns the float32 inputs of the f16/bf16 conversion check:
// every 4099th bit pattern (NaNs and infinities included; the conversions
// are defined on them bit-wise) and the neighbours of the f16 and bf16
// rounding boundaries around every f16 value.
func F16Sweep() []float32 {
	var v []float32
	for u := uint64(0); u < 1<<32; u += 4099 {
		v = append(v, math.Float32frombits(uint32(u)))
	}
	// f16 halfway points: for each f16 value h, the f32 exactly between
	// h and the next f16, and its two f32 neighbours (ties go to even).
	for h := uint32(0); h < 0x7c00; h++ {
		lo := f16ToF32(h)
		hi := f16ToF32(h + 1)
		mid := float32((float64(lo) + float64(hi)) / 2)
		m := math.Float32bits(mid)
		for _, b := range []uint32{m - 1, m, m + 1} {
			v = append(v, math.Float32frombits(b), math.Float32frombits(b|1<<31))
		}
	}
	return v
}

// f16ToF32 widens binary16 bits (finite values only).
func f16ToF32(h uint32) float32 {
	exp, man := h>>10&0x1f, h&0x3ff
	if exp == 0 {
		return float32(man) * 0x1p-24
	}
	return math.Float32frombits((exp+112)<<23 | man<<13)
}
