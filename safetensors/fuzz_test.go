package safetensors

import (
	"bytes"
	"testing"
)

// FuzzRead feeds arbitrary bytes to Read. Whatever the input, Read must not
// panic; when it accepts a file, the tensors must tile the byte buffer with
// sizes matching shape × dtype, and writing them back and reading again
// must give the same tensors. The seed corpus (testdata/fuzz/FuzzRead)
// holds valid files and each class of broken header; `go test` runs it as a
// plain test, `go test -fuzz FuzzRead ./safetensors` explores further.
func FuzzRead(f *testing.F) {
	f.Add([]byte(crateSerialized))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Read(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		var pos int64
		var ws []WriteTensor
		for _, name := range file.Names() {
			ten, err := file.Tensor(name)
			if err != nil {
				t.Fatal(err)
			}
			size, ok := byteSize(ten.Shape, ten.DType)
			if !ok || ten.Begin != pos || int64(len(ten.Data)) != size || ten.End-ten.Begin != size {
				t.Fatalf("accepted %s with %d bytes at %d (expected start %d)", ten.describe(), len(ten.Data), ten.Begin, pos)
			}
			pos = ten.End
			ws = append(ws, WriteTensor{Name: ten.Name, DType: ten.DType, Shape: ten.Shape, Data: ten.Data})
		}
		if pos != int64(len(b))-file.DataOffset() {
			t.Fatalf("tensors cover %d bytes, buffer has %d", pos, int64(len(b))-file.DataOffset())
		}
		var out bytes.Buffer
		if err := Write(&out, ws, file.Metadata()); err != nil {
			t.Fatalf("rewriting an accepted file: %v", err)
		}
		again, err := Read(bytes.NewReader(out.Bytes()), int64(out.Len()))
		if err != nil {
			t.Fatalf("re-reading a rewritten file: %v", err)
		}
		for _, w := range ws {
			g, err := again.Tensor(w.Name)
			if err != nil || g.DType != w.DType || !bytes.Equal(g.Data, w.Data) || len(g.Shape) != len(w.Shape) {
				t.Fatalf("%q changed in the round trip (%v)", w.Name, err)
			}
		}
		if len(again.Metadata()) != len(file.Metadata()) {
			t.Fatal("metadata changed in the round trip")
		}
	})
}
