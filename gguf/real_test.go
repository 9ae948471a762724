package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealFiles reads GGUF files made by other tools, named in
// LOOM_GGUF_FILES (a list separated by the OS path list separator; tests
// cannot download models). Each is opened (mmap) and read (ReaderAt), the
// two must agree, and the file is re-written through the Writer entry for
// entry: where the file is laid out as ggml lays files out (tensors packed
// in order, padded to the alignment, the data section padded at its end),
// the re-write must be byte-identical; otherwise it must read back equal.
//
// Checked so far: llama-2-tiny-random.gguf (1.75 MB, in the ollama
// repository's api/data; made by llama.cpp's converter: 18 keys including a
// 32,000-token vocabulary, 12 f16/f32 tensors) reads as the @huggingface/gguf
// parser reads it and re-writes byte for byte.
func TestRealFiles(t *testing.T) {
	list := os.Getenv("LOOM_GGUF_FILES")
	if list == "" {
		t.Skip("set LOOM_GGUF_FILES to GGUF files made by other tools to check the reader and writer against them")
	}
	for _, path := range filepath.SplitList(list) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			mf, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer mf.Close()
			fd, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer fd.Close()
			rf, err := Read(fd, int64(len(raw)))
			if err != nil {
				t.Fatal(err)
			}
			sameFile(t, mf, rf)
			w := NewWriter()
			for _, kv := range mf.Metadata.KVs() {
				if err := w.Set(kv.Key, kv.Value); err != nil {
					t.Fatalf("the Writer refuses the file's metadata: %v", err)
				}
			}
			packed, next := true, int64(0)
			for i := range mf.Tensors {
				ti := &mf.Tensors[i]
				d, err := mf.TensorData(ti)
				if err != nil {
					t.Fatal(err)
				}
				if err := w.AddTensor(ti.Name, ti.Type, ti.Shape(), d); err != nil {
					t.Fatalf("the Writer refuses a tensor: %v", err)
				}
				packed = packed && ti.Offset == next
				next = alignUp(ti.Offset+ti.Size, mf.Alignment)
			}
			packed = packed && mf.DataOffset+next == mf.Size
			var buf bytes.Buffer
			if _, err := w.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			if packed && !bytes.Equal(buf.Bytes(), raw) {
				n := 0
				for n < min(len(raw), buf.Len()) && raw[n] == buf.Bytes()[n] {
					n++
				}
				t.Fatalf("re-write differs from the file at byte %d (%d bytes written, %d in the file)", n, buf.Len(), len(raw))
			}
			again, err := readBoth(t, buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			sameMetadata(t, mf.Metadata.KVs(), again.Metadata.KVs(), packed)
			var names []string
			for _, ti := range mf.Tensors {
				names = append(names, ti.Name+" "+ti.Type.String())
			}
			t.Logf("v%d, %d keys, %d tensors (%s), alignment %d, data at %d of %d bytes; ggml layout: %v, re-written identically: %v",
				mf.Version, mf.Metadata.Len(), len(mf.Tensors), strings.Join(names, ", "), mf.Alignment, mf.DataOffset, mf.Size, packed, packed)
		})
	}
}
