// Package safetensors reads and writes the safetensors tensor file format
// (github.com/huggingface/safetensors, README "Format"), the format Hugging
// Face checkpoints ship their weights in. It knows nothing of graphs or
// executors: a tensor here is a name, a dtype, a shape and a byte slice.
//
// # Format
//
// A file is an 8-byte little-endian header length N, N bytes of JSON header,
// then the byte buffer. The header maps each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end)}, offsets counted from the
// start of the byte buffer; the optional key "__metadata__" holds a
// string-to-string map.
//
// # Contract
//
// Open maps a file read-only (mmap on Unix, a plain read elsewhere) and
// exposes each tensor's bytes as a slice into the mapping: nothing is
// copied, and the slices stay valid until Close. (As with any mapping, a
// file truncated by another process while mapped makes reads of the lost
// pages fault; WriteFile replaces files by renaming, which is safe.) Read does the same from an
// io.ReaderAt, copying the byte buffer into memory (the fuzz target uses it).
// A file is validated completely before either returns, with the rules of
// the reference Rust crate plus the ones its spec states:
//
//   - the header length is at most 100,000,000 bytes (the crate's
//     MAX_HEADER_SIZE) and fits in the file;
//   - the header is UTF-8 JSON holding one object, with no duplicate keys at
//     any level; JSON whitespace may pad it on either side (the spec names
//     trailing spaces; the crate also accepts leading whitespace, which
//     writers use to align the buffer to a page);
//   - every dtype is one of F64, F32, F16, BF16, I64, I32, I16, I8, U8, U16,
//     U32, U64, BOOL, F8_E4M3, F8_E5M2; other names the crate knows (F4,
//     F6_*, F8_E8M0, *FNUZ, C64) are reported by name as unsupported;
//   - shape entries and offsets are non-negative integers; the element count
//     and byte size must not overflow 63 bits;
//   - end-begin equals elements × dtype size;
//   - sorted by offset, the tensors tile the byte buffer exactly: no overlap,
//     no hole (the spec forbids holes to prevent polyglot files), and the
//     last tensor ends where the file ends.
//
// Every violation is an error naming the file (or "safetensors" for Read),
// the tensor with its dtype, shape and offsets, and the rule it breaks;
// nothing panics, whatever the input (FuzzRead checks this).
//
// Write produces files the Rust crate reads: tensors ordered by decreasing
// element size then name (the crate's order), the header padded with spaces
// to a multiple of 8 bytes so the buffer starts aligned.
//
// OpenDir opens a multi-file checkpoint: every *.safetensors file in a
// directory, checked against model.safetensors.index.json when present, and
// finds a tensor by name across the files.
package safetensors
