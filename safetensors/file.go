package safetensors

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// File is an opened safetensors file. Its methods are safe for concurrent
// use; Close must not race with them.
type File struct {
	name     string // the path, or "safetensors" for Read
	header   *header
	byName   map[string]int
	data     []byte       // the byte buffer: len == header.dataLen
	unmap    func() error // releases the mapping; nil for Read
	closed   bool
	fileSize int64
}

// Tensor is one tensor of a File: its description and its bytes,
// little-endian and row-major as the format stores them. Data aliases the
// File's mapping: it must not be written to (the mapping is read-only, a
// write faults) and must not be used after Close.
type Tensor struct {
	TensorInfo
	Data []byte
}

// Open maps the file at path read-only and validates it (see the package
// documentation for the rules).
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("safetensors: open %s: not a regular file", path)
	}
	size := st.Size()
	wrap := func(err error) error { return fmt.Errorf("safetensors: open %s: %w", path, err) }
	var prefix [headerPrefix]byte
	if size >= headerPrefix {
		if _, err := f.ReadAt(prefix[:], 0); err != nil {
			return nil, wrap(err)
		}
	}
	n, err := readHeaderLength(prefix[:], size)
	if err != nil {
		return nil, wrap(err)
	}
	mem, unmap, err := mapFile(f, size)
	if err != nil {
		return nil, wrap(fmt.Errorf("mapping the file: %w", err))
	}
	h, err := parseHeader(mem[headerPrefix:headerPrefix+n], size-headerPrefix-n)
	if err != nil {
		_ = unmap()
		return nil, wrap(err)
	}
	return newFile(path, h, mem[headerPrefix+n:], unmap, size), nil
}

// Read reads and validates a safetensors file of size bytes from r. The
// byte buffer is copied into memory.
func Read(r io.ReaderAt, size int64) (*File, error) {
	wrap := func(err error) error { return fmt.Errorf("safetensors: %w", err) }
	if size < 0 {
		return nil, wrap(fmt.Errorf("negative size %d", size))
	}
	var prefix [headerPrefix]byte
	if size >= headerPrefix {
		if err := readFull(r, prefix[:], 0); err != nil {
			return nil, wrap(err)
		}
	}
	n, err := readHeaderLength(prefix[:], size)
	if err != nil {
		return nil, wrap(err)
	}
	hb := make([]byte, n)
	if err := readFull(r, hb, headerPrefix); err != nil {
		return nil, wrap(err)
	}
	bufLen := size - headerPrefix - n
	h, err := parseHeader(hb, bufLen)
	if err != nil {
		return nil, wrap(err)
	}
	// The header is valid, so bufLen bytes are all tensor data: only now is
	// the buffer allocated.
	data := make([]byte, bufLen)
	if err := readFull(r, data, headerPrefix+n); err != nil {
		return nil, wrap(err)
	}
	f := newFile("safetensors", h, data, nil, size)
	return f, nil
}

func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %d bytes at offset %d: %w", len(p), off, err)
}

func newFile(name string, h *header, data []byte, unmap func() error, size int64) *File {
	f := &File{name: name, header: h, data: data, unmap: unmap, fileSize: size, byName: make(map[string]int, len(h.tensors))}
	for i, t := range h.tensors {
		f.byName[t.Name] = i
	}
	return f
}

// Close releases the mapping. The Data slices of the file's tensors must not
// be used afterwards. Closing twice is harmless.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	f.data = nil
	if f.unmap != nil {
		return f.unmap()
	}
	return nil
}

// Path is the path the file was opened from ("safetensors" for Read).
func (f *File) Path() string { return f.name }

// Metadata is the header's "__metadata__" map (nil when absent). The caller
// must not modify it.
func (f *File) Metadata() map[string]string { return f.header.metadata }

// Len is the number of tensors.
func (f *File) Len() int { return len(f.header.tensors) }

// Names lists the tensor names in byte-buffer order.
func (f *File) Names() []string {
	names := make([]string, len(f.header.tensors))
	for i, t := range f.header.tensors {
		names[i] = t.Name
	}
	return names
}

// SortedNames lists the tensor names in lexical order.
func (f *File) SortedNames() []string {
	names := f.Names()
	sort.Strings(names)
	return names
}

// Info describes the tensor called name.
func (f *File) Info(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.header.tensors[i].clone(), true
}

// Tensor returns the tensor called name, its Data a slice of the mapping.
func (f *File) Tensor(name string) (Tensor, error) {
	if f.closed {
		return Tensor{}, fmt.Errorf("safetensors: %s: tensor %q requested after Close", f.name, name)
	}
	i, ok := f.byName[name]
	if !ok {
		return Tensor{}, fmt.Errorf("safetensors: %s has no tensor %q", f.name, name)
	}
	t := f.header.tensors[i].clone()
	return Tensor{TensorInfo: t, Data: f.data[t.Begin:t.End:t.End]}, nil
}

// HeaderSize is the length of the JSON header (N) in bytes.
func (f *File) HeaderSize() int64 { return f.header.size }

// DataOffset is the file offset of the byte buffer: 8 + HeaderSize.
func (f *File) DataOffset() int64 { return headerPrefix + f.header.size }

// clone copies the shape so callers cannot modify the header through it.
func (t TensorInfo) clone() TensorInfo {
	t.Shape = append([]int(nil), t.Shape...)
	return t
}
