package gguf

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/quant"
)

// kvFile starts a file of one metadata entry with key "k" and returns the
// offset of its value type field; the case appends type and value.
func kvFile(r *raw, tensors uint64) int64 {
	r.header(3, tensors, 1)
	r.str("k")
	return r.pos()
}

// alignFile is a file whose general.alignment has value v of type t
// (written by put), with one f32 tensor of 8 elements.
func alignFile(t ValueType, put func(r *raw)) []byte {
	var r raw
	r.header(3, 1, 1)
	r.str(AlignmentKey)
	r.u32(uint32(t))
	put(&r)
	r.tensorInfo("w", quant.F32, []uint64{8}, 0)
	r.zeros(64 + 32)
	return r.b
}

// tensorFile is a file of no metadata and the given tensor infos (name,
// type, dims, offset), then data bytes of zeros after 32-byte padding.
func tensorFile(r *raw, infos func(r *raw), n uint64, data int) {
	r.header(3, n, 0)
	infos(r)
	r.pad(32)
	r.zeros(data)
}

// TestMalformed feeds files broken in each way the reader checks and wants
// a *FormatError naming the field, at the field's offset, with the reason;
// never a panic, and the same error through Read and the in-memory path.
func TestMalformed(t *testing.T) {
	type badCase struct {
		name   string
		build  func(r *raw) int64 // returns where the error must point
		field  string
		reason string
		eof    bool // must wrap io.ErrUnexpectedEOF
	}
	u64s := func(r *raw, n int, v uint64) {
		for range n {
			r.u64(v)
		}
	}
	cases := []badCase{
		{"empty file", func(r *raw) int64 { return 0 }, "magic", "truncated: magic needs 4 bytes, 0 are left", true},
		{"bad magic", func(r *raw) int64 { r.bytes([]byte("GGML")...); r.zeros(20); return 0 }, "magic", `"GGML" is not "GGUF"`, false},
		{"version 1", func(r *raw) int64 { r.header(1, 0, 0); return 4 }, "version", "version 1", false},
		{"version 4", func(r *raw) int64 { r.header(4, 0, 0); return 4 }, "version", "version 4 is not 2 or 3", false},
		{"big-endian", func(r *raw) int64 { r.header(0x03000000, 0, 0); return 4 }, "version", "byte-swapped", false},
		{"truncated header", func(r *raw) int64 { r.bytes('G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0); return 8 }, "tensor_count", "truncated", true},
		{"metadata count beyond the file", func(r *raw) int64 { r.header(3, 0, 1<<62); r.zeros(100); return 16 }, "metadata_kv_count", "entries need at least 14 bytes each, the file has 100 bytes", false},
		{"tensor count beyond the file", func(r *raw) int64 { r.header(3, 1<<40, 0); r.zeros(100); return 8 }, "tensor_count", "tensor infos need at least 24 bytes each", false},
		{"key over the limit", func(r *raw) int64 { r.header(3, 0, 1); r.u64(MaxKeyLen + 1); r.zeros(100); return 24 }, "metadata[0] key", "length 65536 exceeds the limit of 65535 bytes", false},
		{"key past the end", func(r *raw) int64 { r.header(3, 0, 1); r.u64(1000); r.zeros(20); return 24 }, "metadata[0] key", "truncated: length 1000, but only 20 bytes are left", true},
		{"empty key", func(r *raw) int64 {
			r.header(3, 0, 1)
			r.str("")
			r.u32(0)
			r.u8(0)
			r.u8(0)
			return 24
		}, "metadata[0] key", "the key is empty", false},
		{"duplicate key", func(r *raw) int64 {
			r.header(3, 0, 2)
			r.str("a")
			r.u32(0)
			r.u8(1)
			at := r.pos()
			r.str("a")
			r.u32(0)
			r.u8(1)
			return at
		}, `metadata key "a"`, "duplicate key (first at offset 24)", false},
		{"unknown value type", func(r *raw) int64 { at := kvFile(r, 0); r.u32(13); r.zeros(8); return at }, `metadata key "k" value type`, "unknown value type 13", false},
		{"bool byte 2", func(r *raw) int64 { at := kvFile(r, 0); r.u32(uint32(TypeBool)); r.u8(2); return at + 4 }, `metadata key "k" value`, "bool byte is 2, not 0 or 1", false},
		{"truncated u64 value", func(r *raw) int64 { at := kvFile(r, 0); r.u32(uint32(TypeUint64)); r.zeros(5); return at + 4 }, `metadata key "k" value`, "truncated: value needs 8 bytes, 5 are left", true},
		{"string over the limit", func(r *raw) int64 {
			at := kvFile(r, 0)
			r.u32(uint32(TypeString))
			r.u64(MaxStringLen + 1)
			r.zeros(50)
			return at + 4
		}, `metadata key "k" value`, "exceeds the limit of 1073741824 bytes", false},
		{"string past the end", func(r *raw) int64 {
			at := kvFile(r, 0)
			r.u32(uint32(TypeString))
			r.u64(100)
			r.zeros(50)
			return at + 4
		}, `metadata key "k" value`, "truncated: length 100, but only 50 bytes are left", true},
		{"array over the limit", func(r *raw) int64 {
			at := kvFile(r, 0)
			r.u32(uint32(TypeArray))
			r.u32(uint32(TypeUint8))
			r.u64(MaxArrayLen + 1)
			return at + 8
		}, `metadata key "k" array length`, "1073741825 elements exceed the limit of 1073741824", false},
		{"array past the end", func(r *raw) int64 {
			at := kvFile(r, 0)
			r.u32(uint32(TypeArray))
			r.u32(uint32(TypeUint64))
			r.u64(1 << 20)
			r.zeros(16)
			return at + 8
		}, `metadata key "k" array length`, "1048576 elements of uint64 need at least 8 bytes each, 16 bytes are left", true},
		{"array of strings past the end", func(r *raw) int64 {
			at := kvFile(r, 0)
			r.u32(uint32(TypeArray))
			r.u32(uint32(TypeString))
			r.u64(3)
			r.str("a")
			r.u64(0)
			return at + 8
		}, `metadata key "k" array length`, "3 elements of string need at least 8 bytes each, 17 bytes are left", true},
		{"unknown array element type", func(r *raw) int64 { at := kvFile(r, 0); r.u32(uint32(TypeArray)); r.u32(42); r.u64(0); return at + 4 }, `metadata key "k" array element type`, "unknown value type 42", false},
		{"bad bool element", func(r *raw) int64 {
			at := kvFile(r, 0)
			r.u32(uint32(TypeArray))
			r.u32(uint32(TypeBool))
			r.u64(3)
			r.bytes(0, 1, 5)
			return at + 4 + 12 + 2
		}, `metadata key "k"[2]`, "bool byte is 5", false},
		{"nested string past the end", func(r *raw) int64 {
			at := kvFile(r, 0)
			r.u32(uint32(TypeArray))
			r.u32(uint32(TypeArray))
			r.u64(2)
			r.u32(uint32(TypeInt8)) // [0]: empty array of int8
			r.u64(0)
			r.u32(uint32(TypeString)) // [1]: one string, too long
			r.u64(1)
			at = r.pos()
			r.u64(99)
			return at
		}, `metadata key "k"[1][0] value`, "truncated: length 99, but only 0 bytes are left", true},
		{"arrays nested 65 deep", func(r *raw) int64 {
			at := kvFile(r, 0)
			r.u32(uint32(TypeArray))
			for range MaxNesting {
				at = r.pos()
				r.u32(uint32(TypeArray))
				r.u64(1)
			}
			r.u32(uint32(TypeUint8))
			r.u64(0)
			return at + 12
		}, "[0][0][0]", "nested more than 64 deep", false},
		{"alignment 0", func(r *raw) int64 { r.b = alignFile(TypeUint32, func(r *raw) { r.u32(0) }); return 24 }, `metadata key "general.alignment"`, "alignment 0 is neither a power of two", false},
		{"alignment 12", func(r *raw) int64 { r.b = alignFile(TypeUint32, func(r *raw) { r.u32(12) }); return 24 }, `metadata key "general.alignment"`, "alignment 12 is neither", false},
		{"alignment 2^33", func(r *raw) int64 { r.b = alignFile(TypeUint64, func(r *raw) { r.u64(1 << 33) }); return 24 }, `metadata key "general.alignment"`, "alignment 8589934592 is neither", false},
		{"alignment negative", func(r *raw) int64 { r.b = alignFile(TypeInt32, func(r *raw) { r.u32(0xffffffe0) }); return 24 }, `metadata key "general.alignment"`, "int32 value -32 is negative", false},
		{"alignment a string", func(r *raw) int64 { r.b = alignFile(TypeString, func(r *raw) { r.str("32") }); return 24 }, `metadata key "general.alignment"`, "value is string, not an integer", false},
		{"tensor name over the limit", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.tensorInfo(strings.Repeat("n", 65), quant.F32, []uint64{1}, 0) }, 1, 32)
			return 24
		}, "tensor[0] name", "length 65 exceeds the limit of 64 bytes", false},
		{"duplicate tensor name", func(r *raw) int64 {
			var at int64
			tensorFile(r, func(r *raw) {
				r.tensorInfo("w", quant.F32, []uint64{1}, 0)
				at = r.pos()
				r.tensorInfo("w", quant.F32, []uint64{1}, 32)
			}, 2, 64)
			return at
		}, `tensor[1] "w" name`, "duplicate tensor name", false},
		{"5 dims", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.str("w"); r.u32(5); u64s(r, 5, 1); r.u32(0); r.u64(0) }, 1, 32)
			return 24 + 9
		}, `tensor[0] "w" n_dimensions`, "5 dimensions, more than the 4 ggml allows", false},
		{"negative dim", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.tensorInfo("w", quant.F32, []uint64{4, 1 << 63}, 0) }, 1, 32)
			return 24 + 9 + 4 + 8
		}, `tensor[0] "w" dims[1]`, "dimension 9223372036854775808 is negative as an int64", false},
		{"element count overflow", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.tensorInfo("w", quant.F32, []uint64{0, 1 << 32, 1 << 31}, 0) }, 1, 32)
			return 24 + 9 + 4 + 16
		}, `tensor[0] "w" dims[2]`, "dims [0 4294967296 2147483648]: the element count overflows int64", false},
		{"removed ggml type 4", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.tensorInfo("w", quant.Type(4), []uint64{32}, 0) }, 1, 32)
			return 24 + 9 + 4 + 8
		}, `tensor[0] "w" type`, "unknown ggml type 4", false},
		{"ggml type 43", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.tensorInfo("w", quant.Type(43), []uint64{32}, 0) }, 1, 32)
			return 24 + 9 + 4 + 8
		}, `tensor[0] "w" type`, "unknown ggml type 43", false},
		{"row not whole blocks", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.tensorInfo("w", quant.Q4_0, []uint64{16, 2}, 0) }, 1, 32)
			return 24 + 9 + 4 + 16
		}, `tensor[0] "w" type`, "rows of 16 elements are not a whole number of 32-element q4_0 blocks", false},
		{"scalar of a block type", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.tensorInfo("w", quant.Q8_0, nil, 0) }, 1, 64)
			return 24 + 9 + 4
		}, `tensor[0] "w" type`, "rows of 1 elements are not a whole number", false},
		{"byte size overflow", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.tensorInfo("w", quant.F64, []uint64{1 << 61, 2}, 0) }, 1, 32)
			return 24 + 9 + 4 + 16
		}, `tensor[0] "w" type`, "the size in bytes overflows int64", false},
		{"offset not aligned", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.tensorInfo("w", quant.F32, []uint64{1}, 4) }, 1, 64)
			return 24 + 9 + 4 + 8 + 4
		}, `tensor[0] "w" offset`, "offset 4 is not a multiple of the alignment 32", false},
		{"offset past the end", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.tensorInfo("w", quant.F32, []uint64{1}, 1<<40) }, 1, 64)
			return 24 + 9 + 4 + 8 + 4
		}, `tensor[0] "w" offset`, "4 bytes at data offset 1099511627776 (file offset 1099511627840) run past the end of the file (128 bytes; data section from 64)", true},
		{"offset beyond int64", func(r *raw) int64 {
			tensorFile(r, func(r *raw) { r.tensorInfo("w", quant.F32, []uint64{1}, 1<<63) }, 1, 64)
			return 24 + 9 + 4 + 8 + 4
		}, `tensor[0] "w" offset`, "past any file", false},
		{"truncated data", func(r *raw) int64 {
			var at int64
			tensorFile(r, func(r *raw) {
				r.tensorInfo("a", quant.F32, []uint64{4}, 0)
				at = r.pos() + 9 + 4 + 8 + 4
				r.tensorInfo("b", quant.F16, []uint64{64}, 32)
			}, 2, 32+127)
			return at
		}, `tensor[1] "b" offset`, "128 bytes at data offset 32 (file offset 128) run past the end of the file (255 bytes; data section from 96)", true},
		{"data section past the end", func(r *raw) int64 {
			r.header(3, 1, 0)
			r.tensorInfo("w", quant.F32, []uint64{0}, 0)
			return r.pos()
		}, "tensor data section", "the data section starts at 64 (the end of the tensor infos aligned to 32), past the end of the file (57 bytes)", true},
		{"same offset", func(r *raw) int64 {
			var at int64
			tensorFile(r, func(r *raw) {
				r.tensorInfo("a", quant.F32, []uint64{8}, 0)
				at = r.pos() + 9 + 4 + 8 + 4
				r.tensorInfo("b", quant.F32, []uint64{8}, 0)
			}, 2, 64)
			return at
		}, `tensor[1] "b" offset`, `its data [0, 32) overlaps tensor "a" [0, 32)`, false},
		{"partial overlap, out of order", func(r *raw) int64 {
			tensorFile(r, func(r *raw) {
				r.tensorInfo("late", quant.F32, []uint64{8}, 64)
				r.tensorInfo("early", quant.F32, []uint64{24}, 0) // [0, 96) covers [64, 96)
			}, 2, 128)
			return 24 + 12 + 4 + 8 + 4 // the later-starting tensor's offset field: "late"
		}, `tensor[0] "late" offset`, `its data [64, 96) overlaps tensor "early" [0, 96)`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r raw
			at := c.build(&r)
			_, err := readBoth(t, r.b)
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FormatError", err)
			}
			if !strings.Contains(fe.Field, c.field) || !strings.Contains(fe.Reason, c.reason) || fe.Offset != at {
				t.Errorf("got field %q at offset %d: %s\nwant field %q at offset %d: …%s…", fe.Field, fe.Offset, fe.Reason, c.field, at, c.reason)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) != c.eof {
				t.Errorf("errors.Is(err, io.ErrUnexpectedEOF) = %v, want %v", !c.eof, c.eof)
			}
			if !strings.HasPrefix(err.Error(), "gguf: ") || !strings.Contains(err.Error(), c.field) {
				t.Errorf("message %q", err)
			}
			// Open on a file says which file.
			if _, err := Open(writeTemp(t, r.b)); err == nil || !strings.Contains(err.Error(), "x.gguf: ") {
				t.Errorf("Open: %v, want the path in the message", err)
			}
		})
	}
}

// TestAccepted covers the edges the reader must accept: the alignments
// either ggml or the spec allow, empty and scalar tensors, tensors not in
// file order, and arrays nested exactly 64 deep.
func TestAccepted(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		want int64
	}{
		{"alignment 4 (power of two)", alignFile(TypeUint32, func(r *raw) { r.u32(4) }), 4},
		{"alignment 24 (multiple of 8)", alignFile(TypeUint32, func(r *raw) { r.u32(24) }), 24},
		{"alignment as uint8", alignFile(TypeUint8, func(r *raw) { r.u8(64) }), 64},
		{"alignment as uint64", alignFile(TypeUint64, func(r *raw) { r.u64(16) }), 16},
		{"alignment as int32", alignFile(TypeInt32, func(r *raw) { r.u32(8) }), 8},
	} {
		f, err := readBoth(t, c.b)
		if err != nil || f.Alignment != c.want {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	var r raw
	tensorFile(&r, func(r *raw) {
		r.tensorInfo("b", quant.F32, []uint64{8}, 32)
		r.tensorInfo("a", quant.F32, []uint64{8}, 0)
		r.tensorInfo("empty", quant.Q4_0, []uint64{32, 0}, 0)
		r.tensorInfo("empty2", quant.F32, []uint64{0}, 96)
		r.tensorInfo("scalar", quant.F32, nil, 64)
	}, 5, 96)
	f, err := readBoth(t, r.b)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		shape []int
		n     int64
		size  int64
	}{"b": {[]int{8}, 8, 32}, "empty": {[]int{0, 32}, 0, 0}, "empty2": {[]int{0}, 0, 0}, "scalar": {[]int{}, 1, 4}} {
		ti, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		d, err := f.TensorData(ti)
		if err != nil || !slices.Equal(ti.Shape(), want.shape) || ti.Elements() != want.n || ti.Size != want.size || int64(len(d)) != want.size {
			t.Errorf("%s: shape %v elements %d size %d data %d bytes, %v; want %v", name, ti.Shape(), ti.Elements(), ti.Size, len(d), err, want)
		}
	}
	// Arrays nested exactly MaxNesting deep.
	r = raw{}
	kvFile(&r, 0)
	r.u32(uint32(TypeArray))
	for range MaxNesting - 1 {
		r.u32(uint32(TypeArray))
		r.u64(1)
	}
	r.u32(uint32(TypeUint8))
	r.u64(1)
	r.u8(42)
	f, err = readBoth(t, r.b)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := f.Metadata.Get("k")
	depth := 0
	for v.Type() == TypeArray {
		a, _ := v.AsArray()
		v = a.Index(0)
		depth++
	}
	if depth != MaxNesting || v.String() != "42" {
		t.Errorf("depth %d, innermost %v", depth, v)
	}
}

// TestClaimsAllocateNothing: counts and lengths the file cannot hold must
// be refused before anything proportional to them is allocated.
func TestClaimsAllocateNothing(t *testing.T) {
	files := map[string][]byte{}
	var r raw
	r.header(3, 1<<40, 1<<40)
	files["counts"] = r.b
	r = raw{}
	kvFile(&r, 0)
	r.u32(uint32(TypeArray))
	r.u32(uint32(TypeUint64))
	r.u64(MaxArrayLen)
	files["array"] = r.b
	r = raw{}
	kvFile(&r, 0)
	r.u32(uint32(TypeString))
	r.u64(MaxStringLen)
	files["string"] = r.b
	r = raw{}
	kvFile(&r, 0) // arrays of arrays, each claiming as many as the file could hold
	r.u32(uint32(TypeArray))
	for range MaxNesting - 1 {
		r.u32(uint32(TypeArray))
		r.u64(300) // 300 × 12 bytes fit in what follows
	}
	files["nested"] = append(r.b, make([]byte, 4096)...) // 341 empty arrays of uint8, then truncated
	for name, b := range files {
		for _, via := range []string{"Read", "memory"} {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var err error
			if via == "Read" {
				_, err = Read(bytes.NewReader(b), int64(len(b)))
			} else {
				_, err = parseBytes(b, "")
			}
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatalf("%s via %s: no error", name, via)
			}
			// The Read path's 64 KiB window is the largest legitimate
			// buffer; 63 levels preallocating 300 arrays each would be 450 KB.
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<10 {
				t.Errorf("%s via %s: allocated %d bytes on a %d-byte file before failing (%v)", name, via, grew, len(b), err)
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir + "/missing.gguf"); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	if _, err := Open(writeTemp(t, nil)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("empty file: %v", err)
	}
	// A ReaderAt shorter than the size it is said to have.
	var r raw
	tensorFile(&r, func(r *raw) { r.tensorInfo("w", quant.F32, []uint64{8}, 0) }, 1, 32)
	f, err := Read(bytes.NewReader(r.b[:len(r.b)-1]), int64(len(r.b)))
	if err != nil {
		t.Fatal(err) // the header reads fine: the data is only read by Data
	}
	if _, err := f.Data("w"); !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), `tensor "w"`) {
		t.Errorf("Data from a short reader: %v", err)
	}
}
