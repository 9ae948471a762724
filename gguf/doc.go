// Package gguf reads and writes GGUF files, the model format of ggml and
// llama.cpp (spec: ggml docs/gguf.md), versions 2 and 3, little-endian.
//
// A file is a header (magic "GGUF", version, tensor and metadata counts),
// typed metadata entries (13 value types; arrays nest), tensor infos
// (name, dims, ggml type, offset), padding to the alignment, then the
// tensor data. This package parses and checks all of it and hands out each
// tensor's bytes; it does not interpret them (package quant knows the
// block formats) and builds no graphs.
//
// Reading:
//
//	f, err := gguf.Open("model.gguf") // mmap, read-only
//	defer f.Close()
//	n, err := f.Metadata.Uint("llama.block_count")
//	t, err := f.Tensor("blk.0.attn_q.weight") // t.Type, t.Dims, t.Shape()
//	b, err := f.Data(t.Name)                  // a slice of the mapping
//
// Open maps the file and Data returns slices of the mapping without
// copying (valid until Close). Read(r, size) parses through an
// io.ReaderAt instead and Data copies; both run the same parser.
//
// Shapes: TensorInfo.Dims is the shape as stored, innermost axis first
// (ggml's ne[0] is the contiguous one); Shape() reverses it into the
// row-major order Loom and Candle use, so a matrix stored as [k, n] has
// shape [n, k] and rows of k elements. Writer.AddTensor takes the
// row-major shape and stores it reversed.
//
// Writing: Writer collects metadata (Set) and tensors given as raw bytes
// of any quant.Type (AddTensor; the caller quantizes), then writes a
// version 3 file laid out as ggml lays it out. AddTensorFunc takes a
// function instead of bytes, called as the tensor is written, so that a
// converter (loom gguf quantize) holds one tensor's output at a time; the
// header needs only each tensor's type and shape, which fix its size.
// Re-writing a file llama.cpp's converter made, entry for entry,
// reproduces it byte for byte (checked on a real file; see real_test.go).
//
// Errors. A malformed file is a *FormatError naming the field at fault
// (`tensor[3] "blk.0.ffn_up.weight" dims[1]`, `metadata key "x"[2]
// array length`) and its byte offset, never a panic. Truncation wraps
// io.ErrUnexpectedEOF. Missing keys and tensors wrap ErrNotFound; a typed
// accessor on a value of another type says which type it found. The
// checks, in the order the parser meets them:
//   - magic; version 2 or 3 (1 is refused with a message, as is a
//     byte-swapped, i.e. big-endian, version);
//   - counts: every metadata entry and tensor info takes a minimum number
//     of bytes, so counts the rest of the file cannot hold are refused
//     before anything is allocated;
//   - keys: non-empty, at most 65535 bytes, no duplicates; value types
//     0…12; bools 0 or 1; strings and arrays at most 2^30 bytes/elements
//     and within the rest of the file (checked before allocating), arrays
//     nested at most 64 deep (the limits Candle and llama.cpp apply);
//   - general.alignment: any integer type; a power of two (ggml) or a
//     positive multiple of 8 (the spec), at most 2^32−1; default 32;
//   - tensor infos: names at most 64 bytes, unique; at most 4 dims, each
//     ≥ 0 (ggml allows empty tensors) and fitting an int, the element
//     count and byte size fitting an int64; a known ggml type whose block
//     divides the innermost dim;
//   - placement: offsets multiples of the alignment, data inside the file,
//     no two tensors overlapping. ggml's reader further requires tensors
//     packed in file order; other writers need not, so this one does not.
//
// Decisions:
//   - Arrays keep their elements as one typed Go slice (Array, Elems), so
//     a 150k-token vocabulary is one []string, not 150k boxed values.
//     String and array elements are copied out of the mapping: metadata
//     stays valid after Close.
//   - A claimed count never sizes an allocation before it is checked
//     against the bytes left: fixed-size arrays are allocated once their
//     bytes are known to be in the file, arrays of strings once their
//     lengths could be (at most twice the bytes left); arrays of arrays
//     grow as elements are actually read, since each level preallocating
//     a false count would multiply it by the nesting depth.
//   - The reader is lenient where llama.cpp is (keys need not be
//     lower_snake_case; any integer type for counts and the alignment);
//     the writer is strict where llama.cpp is stricter than the spec
//     (uint32 power-of-two alignment ≥ 8, names under 64 bytes, ASCII
//     keys), so what Loom writes loads everywhere.
//   - Version 1 (32-bit counts) is refused: llama.cpp dropped it too.
//   - On platforms without golang.org/x/sys/unix, Open reads the file
//     into memory instead of mapping it.
package gguf
