package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/loomgraph/loom/gguf"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/safetensors"
)

// Metadata keys the quantizer sets (llama.cpp's LLM_KV_GENERAL_*).
const (
	quantVersionKey = "general.quantization_version"
	fileTypeKey     = "general.file_type"
	// ggmlQuantVersion is GGML_QNT_VERSION, the version of the block
	// layouts package quant writes (2 since ggml changed Q4/Q5/Q8 in 2023).
	ggmlQuantVersion = 2
	// stMetaPrefix prefixes the safetensors "__metadata__" entries copied
	// into the GGUF metadata as strings.
	stMetaPrefix = "safetensors.metadata."
)

// llamaFileTypes maps each target type to llama.cpp's general.file_type
// (enum llama_ftype in include/llama.h). The k-quants have several
// "mixtures" (Q4_K_S, Q4_K_M: which tensors get more bits). -type with a
// type's name writes every quantizable tensor in that one type, which is
// what the _S mixtures describe (llama.cpp's README: "Q4_K_S uses
// GGML_TYPE_Q4_K for all tensors"), so it records those. Q2_K has no _S
// among the original names (LLAMA_FTYPE_MOSTLY_Q2_K_S = 21 is a later,
// imatrix-requiring mixture), so it records MOSTLY_Q2_K. The _M mixtures
// of the usual downloads, -type q4_k_m and q5_k_m (15, 17), and the other
// k-quant mixtures (q3_k_s, q3_k_m, q3_k_l, q4_k_s, q5_k_s) choose each
// tensor's type as llama.cpp does (kMixtures, gguf_mixture.go) and
// record their own ids (so -type q4_k and -type q4_k_s both record 14:
// the first one type everywhere, as llama.cpp's --pure, the second its
// mixture).
var llamaFileTypes = map[quant.Type]struct {
	id   uint32
	name string
}{
	quant.F32:  {0, "ALL_F32"},
	quant.F16:  {1, "MOSTLY_F16"},
	quant.Q4_0: {2, "MOSTLY_Q4_0"},
	quant.Q4_1: {3, "MOSTLY_Q4_1"},
	quant.Q8_0: {7, "MOSTLY_Q8_0"},
	quant.Q5_0: {8, "MOSTLY_Q5_0"},
	quant.Q5_1: {9, "MOSTLY_Q5_1"},
	quant.Q2_K: {10, "MOSTLY_Q2_K"},
	quant.Q3_K: {11, "MOSTLY_Q3_K_S"},
	quant.Q4_K: {14, "MOSTLY_Q4_K_S"},
	quant.Q5_K: {16, "MOSTLY_Q5_K_S"},
	quant.Q6_K: {18, "MOSTLY_Q6_K"},
	quant.BF16: {32, "MOSTLY_BF16"},
}

// keepByName lists the tensors of rank ≥ 2 llama.cpp's quantizer leaves
// as they are because of what they are (tensor_allows_quantization in
// src/llama-quant.cpp), matched as there on the GGUF tensor name: a
// substring, or the whole name where exact is set. Only the rules that
// hold across architectures are here; llama.cpp's per-model ones (RWKV's
// time_mix_*, Gemma-3n's altup/laurel, vision towers' patch and position
// embeddings) are not. Besides these, a tensor whose name does not end in
// "weight" is kept (see keepReason).
var keepByName = []struct {
	match string
	exact bool
	why   string
}{
	{"_norm.weight", false, "a norm"},
	{"ffn_gate_inp.weight", false, "an expert router (ffn_gate_inp), small and sensitive"},
	{"position_embd.weight", true, "position embeddings"},
	{"token_types.weight", true, "token-type embeddings"},
	{"ssm_conv1d", false, "a small convolution (ssm_conv1d)"},
	{"attn_rel_b.weight", false, "a relative position bias"},
}

// qtensor is one tensor of the input and what becomes of it.
type qtensor struct {
	name  string
	shape []int // row-major, as given to gguf.Writer
	from  quant.Type
	data  []byte // the input bytes (a slice of a mapping)
	to    quant.Type
	why   string // why the tensor is kept as it is; "" when converted
	note  string // why a mixture chose to for it, when not its base type
}

// qinput is an opened input: its tensors and the metadata to copy.
type qinput struct {
	kind    string
	kvs     []gguf.KV
	notes   []string // what happened to the metadata, for the report
	tensors []*qtensor
	files   []string // the files whose data the tensors point into
	close   func() error
}

// parseTarget reads the -type value (case-insensitive): a type package
// quant quantizes and llama.cpp stores weights in, or one of the
// mixtures kMixtures lists.
func parseTarget(typ string) (qtarget, error) {
	if m, ok := kMixtures[strings.ToLower(typ)]; ok {
		return qtarget{typ: m.base, mix: m}, nil
	}
	to, err := quant.ParseType(typ)
	if err != nil {
		return qtarget{}, fmt.Errorf("-type %q: unknown type; want one of %s", typ, targetNames())
	}
	if _, ok := llamaFileTypes[to]; !ok {
		why := "Loom has no quantizer for it"
		if to == quant.Q8_1 || to == quant.Q8_K {
			why = "it is an activation format (the other operand of a quantized dot product), not a weight format"
		}
		return qtarget{}, fmt.Errorf("-type %v: %s; want one of %s", to, why, targetNames())
	}
	return qtarget{typ: to}, nil
}

// runGGUFQuantize runs "loom gguf quantize -type TYPE IN OUT" once the
// flags are parsed.
func runGGUFQuantize(to qtarget, in, out string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, "loom gguf quantize:", err)
		return exitFail
	}
	src, err := openQuantInput(in)
	if err != nil {
		return fail(err)
	}
	defer src.close()
	if err := checkNotInput(out, src.files); err != nil {
		return fail(err)
	}
	// stdout is not buffered: a line per tensor as it is written is the
	// progress report of a run that can take minutes.
	if err := quantizeTo(stdout, src, in, out, to); err != nil {
		return fail(err)
	}
	return exitOK
}

// targetNames lists the -type values, in the order of llama.cpp's ftypes.
func targetNames() string {
	targets := make([]qtarget, 0, len(llamaFileTypes)+len(kMixtures))
	for t := range llamaFileTypes {
		targets = append(targets, qtarget{typ: t})
	}
	for _, m := range kMixtures {
		targets = append(targets, qtarget{typ: m.base, mix: m})
	}
	// By file type; a plain type before the mixture that shares its id
	// (q3_k records MOSTLY_Q3_K_S, as q3_k_s does).
	id := func(q qtarget) int { n, _ := q.fileType(); return int(n) }
	isMix := func(q qtarget) int {
		if q.mix != nil {
			return 1
		}
		return 0
	}
	slices.SortFunc(targets, func(a, b qtarget) int {
		return cmp.Or(id(a)-id(b), isMix(a)-isMix(b), strings.Compare(a.String(), b.String()))
	})
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.String()
	}
	return strings.Join(names, ", ")
}

// openQuantInput opens IN: a directory is a safetensors checkpoint
// (safetensors.OpenDir); a file starting with GGUF's magic, or named
// *.gguf, is read as GGUF; any other file as safetensors, and when that
// fails too the error says it is neither.
func openQuantInput(path string) (*qinput, error) {
	st, err := os.Stat(path)
	if pe := (*os.PathError)(nil); errors.As(err, &pe) {
		return nil, fmt.Errorf("%s: %w", path, pe.Err) // "IN: no such file or directory"
	} else if err != nil {
		return nil, err
	}
	if st.IsDir() {
		d, err := safetensors.OpenDir(path)
		if err != nil {
			return nil, err
		}
		in, err := safetensorsInput(d.Files())
		if err != nil {
			d.Close()
			return nil, err
		}
		in.kind = fmt.Sprintf("safetensors directory, %d files", len(d.Files()))
		in.close = d.Close
		return in, nil
	}
	var magic [4]byte
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	n, _ := io.ReadFull(fd, magic[:])
	fd.Close()
	if string(magic[:n]) == gguf.Magic || strings.EqualFold(filepath.Ext(path), ".gguf") {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, err // names the file and the field at fault
		}
		in, err := ggufInput(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		in.kind, in.files, in.close = "gguf", []string{path}, f.Close
		return in, nil
	}
	f, err := safetensors.Open(path)
	if err != nil {
		if strings.EqualFold(filepath.Ext(path), ".safetensors") {
			return nil, err
		}
		return nil, fmt.Errorf("%s is neither a GGUF file (it starts with %q, not %q) nor a safetensors file (%v)", path, magic[:n], gguf.Magic, err)
	}
	in, err := safetensorsInput([]*safetensors.File{f})
	if err != nil {
		f.Close()
		return nil, err
	}
	in.kind, in.close = "safetensors", f.Close
	return in, nil
}

// ggufInput takes every metadata entry and tensor of f. general.alignment
// is kept, written as the uint32 gguf.Writer (and ggml) want; an alignment
// ggml could not load (not a power of two) is dropped with a note, and
// the default of 32 applies.
func ggufInput(f *gguf.File) (*qinput, error) {
	in := &qinput{}
	for _, kv := range f.Metadata.KVs() {
		if kv.Key == gguf.AlignmentKey {
			a := f.Alignment
			if a < 8 || a&(a-1) != 0 {
				in.notes = append(in.notes, fmt.Sprintf("dropped %s = %d: ggml needs a power of two ≥ 8; the output uses %d", gguf.AlignmentKey, a, gguf.DefaultAlignment))
				continue
			}
			kv.Value = gguf.Uint32(uint32(a))
		}
		in.kvs = append(in.kvs, kv)
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		data, err := f.TensorData(t)
		if err != nil {
			return nil, err
		}
		in.tensors = append(in.tensors, &qtensor{name: t.Name, shape: t.Shape(), from: t.Type, data: data})
	}
	return in, nil
}

// safetensorsTypes maps the safetensors dtypes that have a GGUF type of
// the same bytes. GGUF has no unsigned integers, booleans or 8-bit floats:
// tensors of those dtypes are refused rather than reinterpreted.
var safetensorsTypes = map[safetensors.DType]quant.Type{
	safetensors.F32:  quant.F32,
	safetensors.F16:  quant.F16,
	safetensors.BF16: quant.BF16,
	safetensors.F64:  quant.F64,
	safetensors.I64:  quant.I64,
	safetensors.I32:  quant.I32,
	safetensors.I16:  quant.I16,
	safetensors.I8:   quant.I8,
}

// safetensorsInput takes the tensors of files, file by file in byte
// order (so the input is read front to back), names and row-major shapes
// unchanged. Each file's "__metadata__" entries are copied as strings
// under stMetaPrefix, sorted by key; where shards disagree on a key the
// first file's value is kept and a note says so. Keys GGUF cannot hold
// (not ASCII) are dropped with a note.
func safetensorsInput(files []*safetensors.File) (*qinput, error) {
	in := &qinput{}
	meta := map[string]string{}
	from := map[string]string{}
	for _, f := range files {
		in.files = append(in.files, f.Path())
		for _, k := range slices.Sorted(mapKeys(f.Metadata())) {
			v := f.Metadata()[k]
			if old, ok := meta[k]; ok {
				if old != v {
					in.notes = append(in.notes, fmt.Sprintf("__metadata__ %q is %q in %s and %q in %s: kept the first", k, old, from[k], v, f.Path()))
				}
				continue
			}
			meta[k], from[k] = v, f.Path()
		}
		for _, name := range f.Names() {
			t, err := f.Tensor(name)
			if err != nil {
				return nil, err
			}
			typ, ok := safetensorsTypes[t.DType]
			if !ok {
				return nil, fmt.Errorf("%s: tensor %q (%s, shape %v): GGUF has no type for safetensors dtype %s (it stores F64, F32, F16, BF16 and signed integers I8…I64); unsigned, boolean and 8-bit float tensors are not converted", f.Path(), name, t.DType, t.Shape, t.DType)
			}
			in.tensors = append(in.tensors, &qtensor{name: name, shape: t.Shape, from: typ, data: t.Data})
		}
	}
	for _, k := range slices.Sorted(mapKeys(meta)) {
		key := stMetaPrefix + k
		if !isASCII(key) {
			in.notes = append(in.notes, fmt.Sprintf("dropped __metadata__ %q: GGUF keys are ASCII", k))
			continue
		}
		in.kvs = append(in.kvs, gguf.KV{Key: key, Value: gguf.String(meta[k])})
	}
	return in, nil
}

func mapKeys(m map[string]string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// checkNotInput refuses an OUT that is one of the input files: the output
// replaces OUT only once it is complete (a rename, which the mapped input
// would survive), but it would still destroy the model it came from.
func checkNotInput(out string, files []string) error {
	ost, err := os.Stat(out)
	if err != nil {
		return nil // OUT does not exist yet (or cannot be read: creating it will say why)
	}
	for _, f := range files {
		if ist, err := os.Stat(f); err == nil && os.SameFile(ost, ist) {
			return fmt.Errorf("output %s is the input file %s; write to another file", out, f)
		}
	}
	if ost.IsDir() {
		return fmt.Errorf("output %s is a directory; give a file name", out)
	}
	return nil
}

// keepReason says why t stays as it is when asked to become type to, or
// returns "" when t is converted. The rules, in order: only f32, f16 and
// bf16 tensors are converted (quantized ones are copied, integers and f64
// too); tensors of rank < 2, counted as ggml counts (ggml_n_dims: outer
// dims of 1 do not count, so [1, 4096] is a vector), are norms, biases
// and other vectors; llama.cpp quantizes only tensors named *weight, and
// not those keepByName lists; and a row (the innermost dim) must be a
// whole number of the target's blocks. llama.cpp falls back to another
// type for rows that do not fit (Q4_K → Q5_0, …); with one type asked
// for, this tool keeps the tensor as it is instead, so that every
// converted tensor is in that type (the mixtures, which are llama.cpp's
// choices, take its fallbacks: chooseMixture).
func keepReason(t *qtensor, to quant.Type) string {
	if why := typeKeepReason(t, to); why != "" {
		return why
	}
	if why := nameKeepReason(t); why != "" {
		return why
	}
	tr, _ := to.Traits()
	if row := t.shape[len(t.shape)-1]; row%tr.Block != 0 {
		return fmt.Sprintf("rows of %d values are not a whole number of %v's %d-value blocks", row, to, tr.Block)
	}
	return ""
}

// typeKeepReason is keepReason's rules on t's type: only f32, f16 and
// bf16 tensors are converted, to another type.
func typeKeepReason(t *qtensor, to quant.Type) string {
	switch t.from {
	case quant.F32, quant.F16, quant.BF16:
	case quant.F64, quant.I8, quant.I16, quant.I32, quant.I64:
		return fmt.Sprintf("%v: only f32, f16 and bf16 tensors are converted", t.from)
	default:
		return fmt.Sprintf("already %v", t.from)
	}
	if t.from == to {
		return fmt.Sprintf("already %v", to)
	}
	return ""
}

// nameKeepReason is keepReason's rules on t's rank and name, those of
// llama.cpp's tensor_allows_quantization: a tensor they keep is one
// llama.cpp leaves as it is whatever the type asked for.
func nameKeepReason(t *qtensor) string {
	rank := len(t.shape)
	for rank > 1 && t.shape[len(t.shape)-rank] == 1 {
		rank--
	}
	if rank < 2 {
		return fmt.Sprintf("rank %d: norms, biases and other vectors stay as they are", rank)
	}
	if !strings.HasSuffix(t.name, "weight") {
		return "not a weight (llama.cpp converts only tensors named *weight)"
	}
	for _, r := range keepByName {
		if r.exact && t.name == r.match || !r.exact && strings.Contains(t.name, r.match) {
			return r.why + ", which llama.cpp keeps as it is"
		}
	}
	return ""
}

// chooseTypes sets every tensor's to and why (and, for a mixture, note):
// keepReason for one type; for a mixture, the type chooseMixture gives,
// kept where typeKeepReason says so (a tensor already quantized is
// copied as it is, not requantized, as with one type).
func chooseTypes(in *qinput, to qtarget) error {
	if to.mix == nil {
		for _, t := range in.tensors {
			t.to, t.why = t.from, keepReason(t, to.typ)
			if t.why == "" {
				t.to = to.typ
			}
		}
		return nil
	}
	hp, err := mixtureHparams(in, to.mix)
	if err != nil {
		return err
	}
	choices, err := chooseMixture(in, to.mix, hp)
	if err != nil {
		return err
	}
	for i, t := range in.tensors {
		c := choices[i]
		t.to, t.why, t.note = t.from, c.why, ""
		if t.why == "" {
			t.why = typeKeepReason(t, c.to)
		}
		if t.why == "" {
			t.to, t.note = c.to, c.note
		}
	}
	return nil
}

// quantizeTo writes the GGUF file OUT: the input's metadata (with the two
// quantization keys set) and every tensor, converted or kept, printing a
// line per tensor as it is written and the totals.
func quantizeTo(w io.Writer, in *qinput, inPath, out string, to qtarget) error {
	if err := chooseTypes(in, to); err != nil {
		return fmt.Errorf("%s: %w", inPath, err)
	}
	ftID, ftName := to.fileType()
	gw := gguf.NewWriter()
	set := map[string]gguf.Value{
		quantVersionKey: gguf.Uint32(ggmlQuantVersion),
		fileTypeKey:     gguf.Uint32(ftID),
	}
	copied := 0
	for _, kv := range in.kvs {
		if v, ok := set[kv.Key]; ok { // overwritten in place
			kv.Value = v
			delete(set, kv.Key)
		} else {
			copied++
		}
		if err := gw.Set(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("%s: %w", inPath, err)
		}
	}
	for _, k := range []string{quantVersionKey, fileTypeKey} {
		if v, ok := set[k]; ok {
			if err := gw.Set(k, v); err != nil {
				return err
			}
		}
	}

	nameWidth := 0
	for _, t := range in.tensors {
		nameWidth = max(nameWidth, len(t.name))
	}
	fmt.Fprintf(w, "%s (%s, %d tensors) → %s as %v\n", inPath, in.kind, len(in.tensors), out, to)
	fmt.Fprintf(w, "metadata: %d keys copied; %s = %d, %s = %d (LLAMA_FTYPE_%s)\n", copied, quantVersionKey, ggmlQuantVersion, fileTypeKey, ftID, ftName)
	for _, n := range in.notes {
		fmt.Fprintf(w, "metadata: %s\n", n)
	}

	// Every tensor goes through AddTensorFunc, kept ones too (their
	// function hands back the input's bytes), so that the lines come out
	// in file order as each tensor is written, and a converted tensor's
	// output exists only while it is being written.
	var (
		inBytes, outBytes int64
		converted         int
		byType            = map[quant.Type]int{} // converted tensors by type, for a mixture
		buf               []byte                 // the output of the tensor being written, reused
		count             = fmt.Sprint(len(in.tensors))
	)
	for i, t := range in.tensors {
		err := gw.AddTensorFunc(t.name, t.to, t.shape, func() ([]byte, error) {
			data := t.data
			if t.why == "" {
				size, err := t.to.RowBytes(elements(t.shape))
				if err != nil {
					return nil, err
				}
				if int64(cap(buf)) < size {
					buf = make([]byte, size)
				}
				data = buf[:size]
				if err := convertTensor(t, data); err != nil {
					return nil, err
				}
				converted++
				byType[t.to]++
			}
			inBytes += int64(len(t.data))
			outBytes += int64(len(data))
			fmt.Fprintf(w, "[%*d/%s] %-*s  %-5v → %-5v  %-18s %12d → %12d bytes", len(count), i+1, count, nameWidth, t.name, t.from, t.to, fmt.Sprint(t.shape), len(t.data), len(data))
			if t.why != "" {
				fmt.Fprintf(w, "  kept: %s", t.why)
			} else if t.note != "" {
				fmt.Fprintf(w, "  (%v: %s)", to, t.note)
			}
			fmt.Fprintln(w)
			return data, nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", inPath, err)
		}
	}
	size, err := writeAtomically(out, gw)
	if err != nil {
		return err
	}
	mix := ""
	if to.mix != nil { // "(q4_k 7, q6_k 2)", in the order of ggml's type ids
		var parts []string
		for _, t := range slices.Sorted(maps.Keys(byType)) {
			parts = append(parts, fmt.Sprintf("%v %d", t, byType[t]))
		}
		mix = " (" + strings.Join(parts, ", ") + ")"
	}
	fmt.Fprintf(w, "total: %d tensors, %d converted to %v%s, %d kept: %d → %d bytes of tensor data (%s); wrote %s, %d bytes\n",
		len(in.tensors), converted, to, mix, len(in.tensors)-converted, inBytes, outBytes, sizeRatio(inBytes, outBytes), out, size)
	return nil
}

// sizeRatio says how much smaller (or, converting to a wider float,
// larger) the tensor data became.
func sizeRatio(in, out int64) string {
	switch {
	case in == 0 || out == 0:
		return "no data"
	case out > in:
		return fmt.Sprintf("%.2f× larger", float64(out)/float64(in))
	}
	return fmt.Sprintf("%.2f× smaller", float64(in)/float64(out))
}

func elements(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d) // the readers checked that the product fits
	}
	return n
}

// writeAtomically writes gw to a temporary file beside path and renames it
// to path once complete, so that a failed run leaves no partial OUT and an
// existing OUT is replaced only by a whole file; it returns the size.
func writeAtomically(path string, gw *gguf.Writer) (int64, error) {
	fd, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := fd.Name()
	n, err := gw.WriteTo(fd)
	if err == nil {
		err = fd.Chmod(0o644) // CreateTemp makes 0600; a model file is for sharing
	}
	if cerr := fd.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	return n, nil
}

// convertTensor converts t's rows from t.from to t.to into dst, which has
// exactly the bytes they take. Rows are shared among GOMAXPROCS goroutines
// in chunks of about 64K values, each widened to f32 in a scratch buffer
// of its goroutine and quantized from there, so the memory used beyond
// dst is a chunk per goroutine. Blocks never straddle rows, so the bytes
// are those quant.Quantize gives for the whole tensor at once.
func convertTensor(t *qtensor, dst []byte) error {
	n := elements(t.shape)
	if n == 0 {
		return nil
	}
	row := int64(t.shape[len(t.shape)-1])
	rows := n / row
	inRow, err := t.from.RowBytes(row)
	if err != nil {
		return err
	}
	outRow, err := t.to.RowBytes(row)
	if err != nil {
		return err
	}
	chunk := max(1, (64<<10)/row) // rows per chunk
	chunks := (rows + chunk - 1) / chunk
	workers := int(min(int64(runtime.GOMAXPROCS(0)), chunks))
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scratch := make([]float32, min(chunk, rows)*row)
			for {
				c := next.Add(1) - 1
				if c >= chunks {
					return
				}
				r0, r1 := c*chunk, min((c+1)*chunk, rows)
				vals := scratch[:(r1-r0)*row]
				err := quant.Dequantize(t.from, t.data[r0*inRow:r1*inRow], vals)
				if err == nil {
					err = quant.Quantize(t.to, vals, dst[r0*outRow:r1*outRow])
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("tensor %q rows %d…%d: %w", t.name, r0, r1-1, err)
					}
					mu.Unlock()
					next.Store(chunks) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
