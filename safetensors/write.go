package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// WriteTensor is one tensor to write: Data holds its elements little-endian
// and row-major, exactly elements × DType.Size() bytes.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Write writes tensors and metadata (nil for none) as a safetensors file.
// Tensors are ordered by decreasing element size, then by name, as the
// reference crate orders them; the header is padded with spaces to a
// multiple of 8 bytes. Names must be unique and not "__metadata__".
func Write(w io.Writer, tensors []WriteTensor, metadata map[string]string) error {
	hdr, order, err := buildHeader(tensors, metadata)
	if err != nil {
		return err
	}
	var n [headerPrefix]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
	if _, err := w.Write(n[:]); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	for _, t := range order {
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", t.Name, err)
		}
	}
	return nil
}

// WriteFile writes a safetensors file at path through a temporary file in
// the same directory that is renamed into place, so a reader (or a mapping
// of the old file) never sees a half-written file.
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err = Write(bw, tensors, metadata); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

func buildHeader(tensors []WriteTensor, metadata map[string]string) ([]byte, []WriteTensor, error) {
	seen := make(map[string]bool, len(tensors))
	for i, t := range tensors {
		where := fmt.Sprintf("safetensors: write: tensor %d %q", i, t.Name)
		if t.Name == "__metadata__" {
			return nil, nil, fmt.Errorf("%s: the name is reserved for the metadata map", where)
		}
		if !utf8.ValidString(t.Name) {
			return nil, nil, fmt.Errorf("%s: the name is not valid UTF-8", where)
		}
		if seen[t.Name] {
			return nil, nil, fmt.Errorf("%s: duplicate name", where)
		}
		seen[t.Name] = true
		if !t.DType.Valid() {
			return nil, nil, fmt.Errorf("%s: invalid dtype %v", where, t.DType)
		}
		for j, d := range t.Shape {
			if d < 0 {
				return nil, nil, fmt.Errorf("%s: shape %v has negative dimension %d at %d", where, t.Shape, d, j)
			}
		}
		size, ok := byteSize(t.Shape, t.DType)
		if !ok {
			return nil, nil, fmt.Errorf("%s: shape %v × %s overflows", where, t.Shape, t.DType)
		}
		if int64(len(t.Data)) != size {
			return nil, nil, fmt.Errorf("%s: %s %v needs %d bytes, Data has %d", where, t.DType, t.Shape, size, len(t.Data))
		}
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, nil, fmt.Errorf("safetensors: write: metadata %q: keys and values must be valid UTF-8", k)
		}
	}
	order := slices.Clone(tensors)
	slices.SortStableFunc(order, func(a, b WriteTensor) int {
		if a.DType.Size() != b.DType.Size() {
			return b.DType.Size() - a.DType.Size()
		}
		return strings.Compare(a.Name, b.Name)
	})
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	sep := func() {
		if !first {
			buf.WriteByte(',')
		}
		first = false
	}
	if metadata != nil {
		sep()
		buf.WriteString(`"__metadata__":{`)
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(&buf, k)
			buf.WriteByte(':')
			writeJSONString(&buf, metadata[k])
		}
		buf.WriteByte('}')
	}
	var off int64
	for _, t := range order {
		sep()
		writeJSONString(&buf, t.Name)
		buf.WriteString(`:{"dtype":"`)
		buf.WriteString(t.DType.String())
		buf.WriteString(`","shape":[`)
		for i, d := range t.Shape {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(strconv.Itoa(d))
		}
		end := off + int64(len(t.Data))
		fmt.Fprintf(&buf, `],"data_offsets":[%d,%d]}`, off, end)
		off = end
	}
	buf.WriteByte('}')
	for buf.Len()%headerPrefix != 0 {
		buf.WriteByte(' ')
	}
	if buf.Len() > MaxHeaderSize {
		return nil, nil, fmt.Errorf("safetensors: write: header of %d bytes exceeds the limit of %d", buf.Len(), MaxHeaderSize)
	}
	return buf.Bytes(), order, nil
}

func writeJSONString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	buf.Write(b)
}
