package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// crateSerialized is the byte string of the reference crate's
// test_deserialization: one I32 [2,2] tensor of zeros.
const crateSerialized = "<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"

func readBytes(b []byte) (*File, error) { return Read(bytes.NewReader(b), int64(len(b))) }

func TestReadCrateVector(t *testing.T) {
	f, err := readBytes([]byte(crateSerialized))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Names(); !slices.Equal(got, []string{"test"}) {
		t.Fatalf("names %v", got)
	}
	ten, err := f.Tensor("test")
	if err != nil {
		t.Fatal(err)
	}
	if ten.DType != I32 || !slices.Equal(ten.Shape, []int{2, 2}) || len(ten.Data) != 16 || ten.Begin != 0 || ten.End != 16 {
		t.Fatalf("tensor %+v", ten.TensorInfo)
	}
	if f.HeaderSize() != 60 || f.DataOffset() != 68 {
		t.Fatalf("header size %d, data offset %d", f.HeaderSize(), f.DataOffset())
	}
}

// TestWriteCrateVectors checks Write against the exact bytes the reference
// crate's serializer produces in its own tests (test_serialization,
// test_empty).
func TestWriteCrateVectors(t *testing.T) {
	data := make([]byte, 0, 24)
	for _, v := range []float32{0, 1, 2, 3, 4, 5} {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	want := []byte{
		64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100,
		116, 121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34,
		58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115,
		101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63,
		0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64,
	}
	var buf bytes.Buffer
	if err := Write(&buf, []WriteTensor{{Name: "attn.0", DType: F32, Shape: []int{1, 2, 3}, Data: data}}, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("got  %v\nwant %v", buf.Bytes(), want)
	}

	buf.Reset()
	if err := Write(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	if want := []byte{8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32}; !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("empty: got %v want %v", buf.Bytes(), want)
	}
	buf.Reset()
	if err := Write(&buf, nil, map[string]string{"framework": "pt"}); err != nil {
		t.Fatal(err)
	}
	want = []byte{
		40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95,
		95, 34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112,
		116, 34, 125, 125, 32, 32, 32, 32, 32,
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("metadata: got %v want %v", buf.Bytes(), want)
	}
	f, err := readBytes(want)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata()["framework"] != "pt" || f.Len() != 0 {
		t.Fatalf("metadata %v, %d tensors", f.Metadata(), f.Len())
	}
}

// randomTensors makes n tensors of random dtypes and shapes (empty and
// scalar shapes included) with random bytes.
func randomTensors(rng *rand.Rand, n int) []WriteTensor {
	var ts []WriteTensor
	for i := range n {
		d := DType(1 + rng.IntN(int(F8_E5M2)))
		rank := rng.IntN(4)
		shape := make([]int, rank)
		for j := range shape {
			shape[j] = rng.IntN(5)
			if rng.IntN(8) == 0 {
				shape[j] = 0
			}
		}
		size, _ := byteSize(shape, d)
		data := make([]byte, size)
		for k := range data {
			data[k] = byte(rng.Uint32())
		}
		ts = append(ts, WriteTensor{Name: fmt.Sprintf("layer.%d.w%c", i, 'a'+rune(rng.IntN(26))), DType: d, Shape: shape, Data: data})
	}
	return ts
}

func TestRoundTripOpenAndRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for trial := range 20 {
		ts := randomTensors(rng, rng.IntN(12))
		meta := map[string]string{"format": "pt", "trial": fmt.Sprint(trial), "quote\"key": "ünïcode ✓"}
		path := filepath.Join(dir, fmt.Sprintf("t%d.safetensors", trial))
		if err := WriteFile(path, ts, meta); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if DataOffset := 8 + binary.LittleEndian.Uint64(raw); DataOffset%8 != 0 {
			t.Fatalf("byte buffer starts at %d, not 8-aligned", DataOffset)
		}
		mapped, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		read, err := readBytes(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []*File{mapped, read} {
			if f.Len() != len(ts) {
				t.Fatalf("%s: %d tensors, wrote %d", f.Path(), f.Len(), len(ts))
			}
			for k, v := range meta {
				if f.Metadata()[k] != v {
					t.Fatalf("metadata %q = %q, want %q", k, f.Metadata()[k], v)
				}
			}
			var prevEnd int64
			for _, name := range f.Names() {
				info, _ := f.Info(name)
				if info.Begin != prevEnd {
					t.Fatalf("%s begins at %d, previous ended at %d", name, info.Begin, prevEnd)
				}
				prevEnd = info.End
			}
			for _, w := range ts {
				got, err := f.Tensor(w.Name)
				if err != nil {
					t.Fatal(err)
				}
				if got.DType != w.DType || !slices.Equal(got.Shape, w.Shape) || !bytes.Equal(got.Data, w.Data) {
					t.Fatalf("%s: got %s %v (%d bytes), wrote %s %v (%d bytes)", w.Name, got.DType, got.Shape, len(got.Data), w.DType, w.Shape, len(w.Data))
				}
				if got.Elements()*int64(got.DType.Size()) != int64(len(got.Data)) {
					t.Fatalf("%s: Elements %d inconsistent with %d bytes", w.Name, got.Elements(), len(got.Data))
				}
			}
		}
		if err := mapped.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := mapped.Tensor("x"); err == nil {
			t.Fatal("Tensor after Close succeeded")
		}
	}
}

// TestWriteOrder checks the crate's order: larger elements first, then by name.
func TestWriteOrder(t *testing.T) {
	ts := []WriteTensor{
		{Name: "b", DType: U8, Shape: []int{3}, Data: []byte{1, 2, 3}},
		{Name: "a", DType: F16, Shape: []int{1}, Data: []byte{0, 60}},
		{Name: "c", DType: F64, Shape: []int{}, Data: make([]byte, 8)},
		{Name: "a8", DType: U8, Shape: []int{0}, Data: nil},
		{Name: "z", DType: I64, Shape: []int{1}, Data: make([]byte, 8)},
	}
	var buf bytes.Buffer
	if err := Write(&buf, ts, nil); err != nil {
		t.Fatal(err)
	}
	f, err := readBytes(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	// Zero-size a8 sorts first among equal offsets by (begin, end, name).
	want := []string{"c", "z", "a", "a8", "b"}
	if got := f.Names(); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func TestWriteErrors(t *testing.T) {
	cases := []struct {
		ts   []WriteTensor
		want string
	}{
		{[]WriteTensor{{Name: "x", DType: F32, Shape: []int{2}, Data: make([]byte, 7)}}, `"x": F32 [2] needs 8 bytes, Data has 7`},
		{[]WriteTensor{{Name: "x", DType: F32, Shape: []int{-1}}}, "negative dimension"},
		{[]WriteTensor{{Name: "x", DType: 0}}, "invalid dtype"},
		{[]WriteTensor{{Name: "__metadata__", DType: U8}}, "reserved"},
		{[]WriteTensor{{Name: "x", DType: U8, Shape: []int{}, Data: []byte{1}}, {Name: "x", DType: U8, Shape: []int{}, Data: []byte{1}}}, "duplicate name"},
		{[]WriteTensor{{Name: "\xff", DType: U8, Shape: []int{}, Data: []byte{1}}}, "not valid UTF-8"},
		{[]WriteTensor{{Name: "x", DType: F32, Shape: []int{1 << 62, 4}}}, "overflows"},
	}
	for _, c := range cases {
		err := Write(&bytes.Buffer{}, c.ts, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Write(%v): error %v, want one containing %q", c.ts[0].Name, err, c.want)
		}
	}
}

// header builds a file from a header string and a byte buffer, with the
// length prefix the header really has.
func file(header string, buf []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, buf...)
}

func TestReadErrors(t *testing.T) {
	i32 := func(name string, shape string, b, e int) string {
		return fmt.Sprintf(`%q:{"dtype":"I32","shape":%s,"data_offsets":[%d,%d]}`, name, shape, b, e)
	}
	zero := func(n int) []byte { return make([]byte, n) }
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"empty file", nil, "shorter than the 8-byte header length"},
		{"short", []byte{1, 0, 0}, "shorter than the 8-byte header length"},
		{"header past file", []byte("<\x00\x00\x00\x00\x00\x00\x00"), "header length 60 exceeds the 0 bytes"},
		{"huge header", []byte("<\x00\x00\x00\x00\xff\xff\xff{}"), "exceeds the limit of 100000000"},
		{"max uint64", append(binary.LittleEndian.AppendUint64(nil, math.MaxUint64), '{', '}'), "exceeds the limit"},
		{"not utf8", []byte("\x01\x00\x00\x00\x00\x00\x00\x00\xff"), "not begin with '{'"},
		{"not utf8 inside", file("{\"\xff\":1}", nil), "not valid UTF-8"},
		{"not json", []byte("\x01\x00\x00\x00\x00\x00\x00\x00{"), "invalid JSON"},
		{"array", file("[1]", nil), "not begin with '{'"},
		{"trailing", file("{}x", nil), "trailing data"},
		{"two objects", file("{}{}", nil), "trailing data"},
		{"duplicate tensor", file("{"+i32("a", "[1]", 0, 4)+","+i32("a", "[1]", 4, 8)+"}", zero(8)), `duplicate key "a"`},
		{"duplicate metadata", file(`{"__metadata__":{"k":"a"},"__metadata__":{"k":"b"}}`, nil), `duplicate key "__metadata__"`},
		{"duplicate metadata key", file(`{"__metadata__":{"k":"a","k":"b"}}`, nil), `duplicate key "k"`},
		{"metadata not string", file(`{"__metadata__":{"k":1}}`, nil), `value of "k" is the number 1`},
		{"metadata not object", file(`{"__metadata__":[1]}`, nil), "not a JSON object"},
		{"duplicate field", file(`{"a":{"dtype":"U8","dtype":"U8","shape":[],"data_offsets":[0,1]}}`, zero(1)), `duplicate field "dtype"`},
		{"missing dtype", file(`{"a":{"shape":[],"data_offsets":[0,1]}}`, zero(1)), `missing field "dtype"`},
		{"missing shape", file(`{"a":{"dtype":"U8","data_offsets":[0,1]}}`, zero(1)), `missing field "shape"`},
		{"missing offsets", file(`{"a":{"dtype":"U8","shape":[]}}`, zero(1)), `missing field "data_offsets"`},
		{"tensor not object", file(`{"a":5}`, nil), `tensor "a" is not a JSON object`},
		{"unsupported dtype", file(`{"a":{"dtype":"F8_E8M0","shape":[],"data_offsets":[0,1]}}`, zero(1)), "dtype F8_E8M0 is not supported"},
		{"unknown dtype", file(`{"a":{"dtype":"Q4","shape":[],"data_offsets":[0,1]}}`, zero(1)), `unknown dtype "Q4"`},
		{"float shape", file(`{"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}`, zero(1)), "shape[0]: 1.0 is not an integer"},
		{"negative shape", file(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}`, zero(1)), "shape[0]: -1 is not an integer"},
		{"string shape", file(`{"a":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}}`, zero(1)), `shape[0]: the string "1" is not an integer`},
		{"offsets arity", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}}`, zero(1)), "data_offsets must be an array [begin, end]"},
		{"size mismatch", file("{"+i32("test", "[2,2]", 0, 4)+"}", zero(4)), `tensor "test" (I32 [2 2], data_offsets [0, 4)): the range holds 4 bytes but [2 2] × I32 needs 16`},
		{"end before begin", file("{"+i32("a", "[0]", 4, 0)+"}", zero(4)), "end is before begin"},
		{"overlap", file("{"+i32("a", "[2]", 0, 8)+","+i32("b", "[1]", 4, 8)+"}", zero(8)), `tensor "b" (I32 [1], data_offsets [4, 8)) overlaps tensor "a"`},
		{"same range", file("{"+i32("a", "[2]", 0, 8)+","+i32("b", "[2]", 0, 8)+"}", zero(8)), "overlaps"},
		{"hole", file("{"+i32("a", "[1]", 0, 4)+","+i32("b", "[1]", 8, 12)+"}", zero(12)), "bytes [4, 8) of the byte buffer belong to no tensor"},
		{"hole at start", file("{"+i32("a", "[1]", 4, 8)+"}", zero(8)), "bytes [0, 4)"},
		{"extra bytes", []byte(crateSerialized + "extra_bogus_data_for_polyglot_file"), "cover 16 bytes of the byte buffer but it holds 50"},
		{"missing bytes", []byte(crateSerialized[:len(crateSerialized)-2]), `runs past the end of the byte buffer (14 bytes)`},
		{"shape overflow", file(`{"test":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}}`, zero(16)), "overflows"},
		{"shape beyond u63", file(`{"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}}`, zero(16)), "is not an integer in [0, 2^63)"},
		{"elements overflow", file(`{"t":{"dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}}`, nil), "overflows"},
		{"huge offset", file(`{"t":{"dtype":"U8","shape":[1],"data_offsets":[9223372036854775806,9223372036854775807]}}`, nil), "belong to no tensor"},
	}
	for _, c := range cases {
		_, err := readBytes(c.file)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "safetensors: ") {
			t.Errorf("%s: error %q, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestReadAccepts(t *testing.T) {
	cases := []struct {
		name  string
		file  []byte
		names []string
	}{
		{"trailing whitespace", []byte("\x06\x00\x00\x00\x00\x00\x00\x00{}\x0D\x20\x09\x0A"), nil},
		{"leading whitespace", []byte("\x06\x00\x00\x00\x00\x00\x00\x00\x09\x0A{}\x0D\x20"), nil},
		{"zero-sized", []byte("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,0],\"data_offsets\":[0, 0]}}"), []string{"test"}},
		{"empty dim with huge dim", file(`{"t":{"dtype":"U8","shape":[2305843009213693952,0],"data_offsets":[0,0]}}`, nil), []string{"t"}},
		{"scalar", file(`{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, make([]byte, 8)), []string{"s"}},
		{"unknown field ignored", file(`{"s":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1],"extra":{"x":[1]}}}`, []byte{1}), []string{"s"}},
		{"unordered header", file(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{7, 9}), []string{"a", "b"}},
	}
	for _, c := range cases {
		f, err := readBytes(c.file)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := f.Names(); !slices.Equal(got, c.names) && !(len(got) == 0 && len(c.names) == 0) {
			t.Errorf("%s: names %v, want %v", c.name, got, c.names)
		}
	}
	f, _ := readBytes(file(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{7, 9}))
	a, _ := f.Tensor("a")
	b, _ := f.Tensor("b")
	if a.Data[0] != 7 || b.Data[0] != 9 {
		t.Fatalf("a=%v b=%v", a.Data, b.Data)
	}
}

func TestOpenErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.safetensors")
	if err := os.WriteFile(path, file("{"+`"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}`+"}", make([]byte, 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `tensor "w" (F32 [3]`) {
		t.Fatalf("error %v", err)
	}
	if _, err := Open(filepath.Join(dir, "missing.safetensors")); err == nil {
		t.Fatal("missing file opened")
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
	empty := filepath.Join(dir, "empty.safetensors")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "shorter than") {
		t.Fatalf("empty: %v", err)
	}
}

func TestOpenDir(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	all := randomTensors(rng, 9)
	shards := [][]WriteTensor{all[:4], all[4:7], all[7:]}
	weightMap := map[string]string{}
	for i, s := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		if err := WriteFile(filepath.Join(dir, name), s, map[string]string{"format": "pt"}); err != nil {
			t.Fatal(err)
		}
		for _, w := range s {
			weightMap[w.Name] = name
		}
	}
	// Without an index.
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d.HasIndex() || len(d.Files()) != 3 || len(d.Names()) != 9 {
		t.Fatalf("index %v, %d files, %d names", d.HasIndex(), len(d.Files()), len(d.Names()))
	}
	for _, w := range all {
		got, err := d.Tensor(w.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Data, w.Data) || got.DType != w.DType {
			t.Fatalf("%s differs", w.Name)
		}
		_, f, ok := d.Info(w.Name)
		if !ok || filepath.Base(f.Path()) != weightMap[w.Name] {
			t.Fatalf("%s found in %v, want %s", w.Name, f, weightMap[w.Name])
		}
	}
	if _, err := d.Tensor("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("missing tensor: %v", err)
	}
	d.Close()

	writeIndex := func(m map[string]string) {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1}, "weight_map": m})
		if err := os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeIndex(weightMap)
	d, err = OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !d.HasIndex() {
		t.Fatal("index not seen")
	}
	d.Close()

	bad := func(mutate func(m map[string]string), want string) {
		t.Helper()
		m := maps(weightMap)
		mutate(m)
		writeIndex(m)
		_, err := OpenDir(dir)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}
	bad(func(m map[string]string) { m[all[0].Name] = "model-00002-of-00003.safetensors" }, "which has no such tensor")
	bad(func(m map[string]string) { m["ghost"] = "model-00001-of-00003.safetensors" }, `tensor "ghost"`)
	bad(func(m map[string]string) { m[all[0].Name] = "model-00009-of-00003.safetensors" }, "not a .safetensors file of the directory")
	bad(func(m map[string]string) { m[all[0].Name] = "../x.safetensors" }, "not a plain file name")
	os.WriteFile(filepath.Join(dir, IndexFile), []byte("{"), 0o644)
	if _, err := OpenDir(dir); err == nil {
		t.Error("broken index accepted")
	}
	os.Remove(filepath.Join(dir, IndexFile))

	// A tensor in two files.
	if err := WriteFile(filepath.Join(dir, "zz.safetensors"), all[:1], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "is in both") {
		t.Errorf("duplicate across files: %v", err)
	}
	os.Remove(filepath.Join(dir, "zz.safetensors"))
	// A broken shard names itself.
	os.WriteFile(filepath.Join(dir, "broken.safetensors"), []byte("xx"), 0o644)
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "broken.safetensors") {
		t.Errorf("broken shard: %v", err)
	}
	if _, err := OpenDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no *.safetensors") {
		t.Errorf("empty dir: %v", err)
	}
}

func maps(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func TestParseDType(t *testing.T) {
	for d := F64; d <= F8_E5M2; d++ {
		got, err := ParseDType(d.String())
		if err != nil || got != d {
			t.Fatalf("%v: %v %v", d, got, err)
		}
	}
	want := map[DType]int{F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, U16: 2, U32: 4, U64: 8, BOOL: 1, F8_E4M3: 1, F8_E5M2: 1}
	for d, s := range want {
		if d.Size() != s {
			t.Errorf("%v size %d, want %d", d, d.Size(), s)
		}
	}
	if DType(0).Valid() || DType(99).Size() != 0 {
		t.Error("invalid dtypes")
	}
}
