package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxHeaderSize is the largest header accepted, in bytes: the reference
// crate's MAX_HEADER_SIZE. A larger length is refused before anything is
// allocated for it.
const MaxHeaderSize = 100_000_000

// headerPrefix is the size of the little-endian header length.
const headerPrefix = 8

// TensorInfo describes one stored tensor.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int
	// Begin and End are the tensor's byte range [Begin, End) in the byte
	// buffer (which starts right after the header).
	Begin, End int64
}

// Elements is the number of elements of the tensor (1 for shape []).
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

func (t TensorInfo) describe() string {
	return fmt.Sprintf("tensor %q (%s %v, data_offsets [%d, %d))", t.Name, t.DType, t.Shape, t.Begin, t.End)
}

// header is a parsed and validated header.
type header struct {
	size     int64 // N, the JSON length
	tensors  []TensorInfo
	metadata map[string]string
	dataLen  int64 // bytes the tensors cover
}

// readHeaderLength reads N from the first 8 bytes and checks it against the
// file size.
func readHeaderLength(prefix []byte, fileSize int64) (int64, error) {
	if fileSize < headerPrefix {
		return 0, fmt.Errorf("file is %d bytes, shorter than the 8-byte header length", fileSize)
	}
	n := binary.LittleEndian.Uint64(prefix)
	if n > MaxHeaderSize {
		return 0, fmt.Errorf("header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	}
	if int64(n) > fileSize-headerPrefix {
		return 0, fmt.Errorf("header length %d exceeds the %d bytes that follow it in the file", n, fileSize-headerPrefix)
	}
	return int64(n), nil
}

// parseHeader parses and validates the JSON header h; bufLen is the size of
// the byte buffer that follows it.
func parseHeader(h []byte, bufLen int64) (*header, error) {
	// The spec says the header begins with '{'; the reference crate also
	// accepts leading JSON whitespace (writers may pad to align the buffer
	// to a page), and so does this reader.
	if t := bytes.TrimLeft(h, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("header does not begin with '{'")
	}
	if !utf8.Valid(h) {
		return nil, errors.New("header is not valid UTF-8")
	}
	hd := &header{size: int64(len(h))}
	dec := json.NewDecoder(bytes.NewReader(h))
	dec.UseNumber()
	seen := map[string]bool{}
	err := walkObject(dec, "header", func(key string) error {
		if seen[key] {
			return fmt.Errorf("duplicate key %q in header", key)
		}
		seen[key] = true
		if key == "__metadata__" {
			m, err := parseMetadata(dec)
			if err != nil {
				return fmt.Errorf("__metadata__: %w", err)
			}
			hd.metadata = m
			return nil
		}
		t, err := parseTensorInfo(dec, key)
		if err != nil {
			return err
		}
		hd.tensors = append(hd.tensors, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Only the padding the spec allows may follow the object.
	if len(bytes.Trim(h[dec.InputOffset():], " \t\r\n")) != 0 {
		return nil, errors.New("header has trailing data after its JSON object")
	}
	if err := hd.validate(bufLen); err != nil {
		return nil, err
	}
	return hd, nil
}

// walkObject reads one JSON object from dec, calling field for each key;
// field must consume the key's value.
func walkObject(dec *json.Decoder, what string, field func(key string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("invalid JSON in %s: %v", what, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("%s is not a JSON object", what)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("invalid JSON in %s: %v", what, err)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("invalid JSON in %s: key %v is not a string", what, tok)
		}
		if err := field(key); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return fmt.Errorf("invalid JSON in %s: %v", what, err)
	}
	return nil
}

func parseMetadata(dec *json.Decoder) (map[string]string, error) {
	m := map[string]string{}
	err := walkObject(dec, "__metadata__", func(key string) error {
		if _, dup := m[key]; dup {
			return fmt.Errorf("duplicate key %q", key)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("invalid JSON for key %q: %v", key, err)
		}
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("value of %q is %s, not a string (the format allows only strings here)", key, jsonKind(v))
		}
		m[key] = s
		return nil
	})
	return m, err
}

func parseTensorInfo(dec *json.Decoder, name string) (TensorInfo, error) {
	t := TensorInfo{Name: name}
	var haveDType, haveShape, haveOffsets bool
	fail := func(format string, a ...any) error {
		return fmt.Errorf("tensor %q: %s", name, fmt.Sprintf(format, a...))
	}
	err := walkObject(dec, fmt.Sprintf("tensor %q", name), func(key string) error {
		var v any
		if err := dec.Decode(&v); err != nil {
			return fail("invalid JSON for %q: %v", key, err)
		}
		switch key {
		case "dtype":
			if haveDType {
				return fail("duplicate field \"dtype\"")
			}
			haveDType = true
			s, ok := v.(string)
			if !ok {
				return fail("dtype is %s, not a string", jsonKind(v))
			}
			d, err := ParseDType(s)
			if err != nil {
				return fail("%v", err)
			}
			t.DType = d
		case "shape":
			if haveShape {
				return fail("duplicate field \"shape\"")
			}
			haveShape = true
			arr, ok := v.([]any)
			if !ok {
				return fail("shape is %s, not an array", jsonKind(v))
			}
			t.Shape = make([]int, len(arr))
			for i, e := range arr {
				n, err := nonNegative(e)
				if err == nil && uint64(n) > math.MaxInt {
					err = fmt.Errorf("%d does not fit in an int", n)
				}
				if err != nil {
					return fail("shape[%d]: %v", i, err)
				}
				t.Shape[i] = int(n)
			}
		case "data_offsets":
			if haveOffsets {
				return fail("duplicate field \"data_offsets\"")
			}
			haveOffsets = true
			arr, ok := v.([]any)
			if !ok || len(arr) != 2 {
				return fail("data_offsets must be an array [begin, end], got %s", jsonKind(v))
			}
			b, err := nonNegative(arr[0])
			if err != nil {
				return fail("data_offsets begin: %v", err)
			}
			e, err := nonNegative(arr[1])
			if err != nil {
				return fail("data_offsets end: %v", err)
			}
			t.Begin, t.End = b, e
		default:
			// Unknown fields are ignored, as the reference crate does.
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	switch {
	case !haveDType:
		return t, fail("missing field \"dtype\"")
	case !haveShape:
		return t, fail("missing field \"shape\"")
	case !haveOffsets:
		return t, fail("missing field \"data_offsets\"")
	}
	return t, nil
}

// nonNegative accepts a JSON integer in [0, 2^63).
func nonNegative(v any) (int64, error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s is not an integer", jsonKind(v))
	}
	n, err := strconv.ParseUint(string(num), 10, 63)
	if err != nil {
		return 0, fmt.Errorf("%s is not an integer in [0, 2^63)", num)
	}
	return int64(n), nil
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", x)
	case json.Number:
		return "the number " + string(x)
	case bool:
		return "a boolean"
	case []any:
		return fmt.Sprintf("an array of %d elements", len(x))
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// validate checks sizes and that the tensors tile [0, bufLen) exactly.
func (h *header) validate(bufLen int64) error {
	slices.SortStableFunc(h.tensors, func(a, b TensorInfo) int {
		if a.Begin != b.Begin {
			return cmpInt(a.Begin, b.Begin)
		}
		if a.End != b.End {
			return cmpInt(a.End, b.End)
		}
		return strings.Compare(a.Name, b.Name)
	})
	var pos int64
	for i, t := range h.tensors {
		if t.End < t.Begin {
			return fmt.Errorf("%s: end is before begin", t.describe())
		}
		size, ok := byteSize(t.Shape, t.DType)
		if !ok {
			return fmt.Errorf("%s: element count × %d bytes overflows", t.describe(), t.DType.Size())
		}
		if t.End-t.Begin != size {
			return fmt.Errorf("%s: the range holds %d bytes but %v × %s needs %d", t.describe(), t.End-t.Begin, t.Shape, t.DType, size)
		}
		switch {
		case t.Begin < pos:
			return fmt.Errorf("%s overlaps %s", t.describe(), h.tensors[i-1].describe())
		case t.Begin > pos:
			return fmt.Errorf("%s: bytes [%d, %d) of the byte buffer belong to no tensor (the format forbids holes)", t.describe(), pos, t.Begin)
		}
		pos = t.End
	}
	if pos != bufLen {
		if pos > bufLen {
			last := h.tensors[len(h.tensors)-1]
			return fmt.Errorf("%s runs past the end of the byte buffer (%d bytes)", last.describe(), bufLen)
		}
		return fmt.Errorf("the tensors cover %d bytes of the byte buffer but it holds %d (the format forbids trailing bytes)", pos, bufLen)
	}
	h.dataLen = pos
	return nil
}

// byteSize is the byte size of a tensor, false when it overflows. It
// follows the reference crate's order: the element count with checked
// multiplications, then the bit count, so [2^61, 0] is a valid empty tensor
// while [2^62, 2^62, 0] overflows.
func byteSize(shape []int, d DType) (int64, bool) {
	n := uint64(1)
	for _, s := range shape {
		hi, lo := bits.Mul64(n, uint64(s))
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	hi, nbits := bits.Mul64(n, uint64(8*d.Size()))
	if hi != 0 || nbits/8 > 1<<63-1 {
		return 0, false
	}
	return int64(nbits / 8), true
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
