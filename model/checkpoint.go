package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/gguf"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/safetensors"
	"github.com/loomgraph/loom/tensor"
)

// A checkpoint is a model's weights as stored: a GGUF file or a directory
// of safetensors files. Weights are found by their GGUF names (token_embd,
// blk.N.attn_q, ...), which are also the graph inputs' names; the
// safetensors checkpoint maps them to Hugging Face's names.
type checkpoint interface {
	// lookup finds the stored tensor of a GGUF-style name.
	lookup(name string) (stored, bool)
	close() error
}

// stored is one tensor of a checkpoint: its bytes stay in the file's
// mapping until converted.
type stored struct {
	name   string     // the name in the file
	shape  []int      // row-major
	format quant.Type // F32, F16, BF16 or a GGML block format
	// unsupported, when set, says why the tensor cannot be used (a
	// safetensors dtype other than F32, F16 and BF16); checkWeights
	// reports it.
	unsupported string
	data        []byte
	// unpermute, when > 0, is the head count of llama.cpp's Q/K row
	// permutation to undo (see undoPermute).
	unpermute int
}

func isFloatFormat(f quant.Type) bool { return f == quant.F32 || f == quant.F16 || f == quant.BF16 }

// hfNames maps the GGUF-style names to Hugging Face's.
func hfName(name string) string {
	var layer int
	var rest string
	if n, _ := fmt.Sscanf(name, "blk.%d.%s", &layer, &rest); n == 2 {
		part, suffix, _ := strings.Cut(rest, ".")
		hf := map[string]string{
			"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
			"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
			"attn_output": "self_attn.o_proj",
			"ffn_gate":    "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
		}[part]
		if hf == "" {
			return ""
		}
		return fmt.Sprintf("model.layers.%d.%s.%s", layer, hf, suffix)
	}
	switch name {
	case "token_embd.weight":
		return "model.embed_tokens.weight"
	case "output_norm.weight":
		return "model.norm.weight"
	case "output.weight":
		return "lm_head.weight"
	}
	return ""
}

// stDir is a Hugging Face checkpoint: safetensors files in a directory.
type stDir struct {
	dir *safetensors.Dir
}

func (d *stDir) close() error { return d.dir.Close() }

func (d *stDir) lookup(name string) (stored, bool) {
	hf := hfName(name)
	if hf == "" {
		return stored{}, false
	}
	info, _, ok := d.dir.Info(hf)
	if !ok {
		return stored{}, false
	}
	t, err := d.dir.Tensor(hf)
	if err != nil {
		return stored{}, false
	}
	s := stored{name: hf, shape: info.Shape, data: t.Data}
	switch info.DType {
	case safetensors.F32:
		s.format = quant.F32
	case safetensors.F16:
		s.format = quant.F16
	case safetensors.BF16:
		s.format = quant.BF16
	default:
		s.unsupported = fmt.Sprintf("dtype %v", info.DType)
	}
	return s, true
}

// ggufFile is a GGUF checkpoint.
type ggufFile struct {
	f   *gguf.File
	cfg Config // for the Q/K permutation's head counts
}

func (g *ggufFile) close() error { return g.f.Close() }

func (g *ggufFile) lookup(name string) (stored, bool) {
	t, err := g.f.Tensor(name)
	if err != nil {
		return stored{}, false
	}
	data, err := g.f.TensorData(t)
	if err != nil {
		return stored{}, false
	}
	s := stored{name: name, shape: t.Shape(), format: t.Type, data: data}
	// llama.cpp's converter permutes the rows of Q (with the query head
	// count) and K (with the key/value head count) for its interleaved
	// rope; Load undoes it so both checkpoints run one graph.
	if strings.HasSuffix(name, ".attn_q.weight") || strings.HasSuffix(name, ".attn_q.bias") {
		s.unpermute = g.cfg.Heads
	}
	if strings.HasSuffix(name, ".attn_k.weight") || strings.HasSuffix(name, ".attn_k.bias") {
		s.unpermute = g.cfg.KVHeads
	}
	return s, true
}

// opened is a checkpoint with what Load reads from it before the weights.
type opened struct {
	ck       checkpoint
	cfg      Config
	declared dtype.DType // the dtype config.json declares (Invalid: none)
	// ropeFactors are GGUF's rope_freqs.weight (nil: none).
	ropeFactors []float32
}

// openCheckpoint opens path: a GGUF file, or a directory holding
// config.json and *.safetensors.
func openCheckpoint(path string) (*opened, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if fi.IsDir() {
		return openHF(path)
	}
	return openGGUF(path)
}

func openHF(path string) (*opened, error) {
	cfg, declared, err := readHFConfig(filepath.Join(path, "config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model: %s has no config.json (want a GGUF file or a directory with config.json and *.safetensors)", path)
	}
	if err != nil {
		return nil, err
	}
	dir, err := safetensors.OpenDir(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	o := &opened{ck: &stDir{dir: dir}, cfg: cfg}
	o.declared = map[string]dtype.DType{"float32": dtype.F32, "float16": dtype.F16, "bfloat16": dtype.BF16}[declared]
	return o, nil
}

func openGGUF(path string) (*opened, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	fail := func(err error) (*opened, error) {
		f.Close()
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	rows := 0
	if t, err := f.Tensor("token_embd.weight"); err == nil && len(t.Dims) == 2 {
		rows = int(t.Dims[1])
	}
	cfg, err := ggufConfig(&f.Metadata, rows)
	if err != nil {
		return fail(err)
	}
	if _, err := f.Tensor("output.weight"); err != nil {
		cfg.TieEmbeddings = true
	}
	o := &opened{ck: &ggufFile{f: f, cfg: cfg}, cfg: cfg}
	if t, err := f.Tensor("rope_freqs.weight"); err == nil {
		data, err := f.TensorData(t)
		if err == nil && t.Type != quant.F32 {
			err = fmt.Errorf("type %v, want f32", t.Type)
		}
		if err != nil {
			return fail(fmt.Errorf("rope_freqs.weight: %w", err))
		}
		o.ropeFactors = make([]float32, len(data)/4)
		for i := range o.ropeFactors {
			o.ropeFactors[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	}
	return o, nil
}

// floatTensor converts a stored float tensor to a host tensor of dt,
// undoing the Q/K permutation if needed. With view, a tensor stored in dt
// (and not permuted) reads the checkpoint's mapping in place where its
// bytes are aligned to its elements, as rawTensor's view does (for the
// parts of a fused weight).
func (s stored) floatTensor(dt dtype.DType, view bool) (*tensor.Tensor, error) {
	if view && s.unpermute == 0 && len(s.data) > 0 {
		if t, ok := mappedFloat(s.data, s.format, dt, s.shape); ok {
			return t, nil
		}
	}
	t, err := tensor.Zeros(dt, s.shape...)
	if err != nil {
		return nil, err
	}
	n := t.Numel()
	src := s.data
	if s.unpermute > 0 {
		src = undoPermute(src, s.shape, s.unpermute)
	}
	read := func(i int) float32 {
		switch s.format {
		case quant.F16:
			return dtype.Float16(binary.LittleEndian.Uint16(src[2*i:])).Float32()
		case quant.BF16:
			return dtype.BFloat16(binary.LittleEndian.Uint16(src[2*i:])).Float32()
		}
		return math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
	same := storedAs(s.format, dt)
	switch d := t.Data().(type) {
	case []float32:
		if same {
			copy(t.Bytes(), src)
			break
		}
		for i := range n {
			d[i] = read(i)
		}
	case []dtype.Float16:
		if same {
			copy(t.Bytes(), src)
			break
		}
		for i := range n {
			d[i] = dtype.ToF16(read(i))
		}
	case []dtype.BFloat16:
		if same {
			copy(t.Bytes(), src)
			break
		}
		for i := range n {
			d[i] = dtype.ToBF16(read(i))
		}
	default:
		return nil, fmt.Errorf("model: compute dtype %v is not f32, f16 or bf16", dt)
	}
	return t, nil
}

// storedAs says whether float format f stores elements of dtype dt as they
// are (the bytes need no conversion).
func storedAs(f quant.Type, dt dtype.DType) bool {
	return f == quant.F32 && dt == dtype.F32 || f == quant.F16 && dt == dtype.F16 || f == quant.BF16 && dt == dtype.BF16
}

// mappedFloat wraps b (a stored tensor's bytes in format f) as a tensor of
// dt and shape without copying it, where f stores dt as it is and b is
// aligned to dt's elements (ok false: copy it instead).
func mappedFloat(b []byte, f quant.Type, dt dtype.DType, shape []int) (*tensor.Tensor, bool) {
	if !storedAs(f, dt) {
		return nil, false
	}
	switch dt {
	case dtype.F32:
		return viewAs[float32](b, shape)
	case dtype.F16:
		return viewAs[dtype.Float16](b, shape)
	default:
		return viewAs[dtype.BFloat16](b, shape)
	}
}

// viewAs wraps b as a tensor of T elements and shape, where b holds whole
// elements aligned to T.
func viewAs[T float32 | dtype.Float16 | dtype.BFloat16](b []byte, shape []int) (*tensor.Tensor, bool) {
	size := int(unsafe.Sizeof(*new(T)))
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%uintptr(size) != 0 || len(b)%size != 0 {
		return nil, false
	}
	t, err := tensor.New(unsafe.Slice((*T)(p), len(b)/size), shape...)
	return t, err == nil
}

// rawTensor copies a stored quantized matrix [R, K] into the u8 tensor
// [R, rowBytes] a graph.QInput takes; with view, the tensor reads the
// checkpoint's mapping in place (or undoPermute's copy), for a caller that
// copies it into a tensor of its own before the checkpoint is closed (the
// parts of a fused weight: stackRows and interleaveRows copy them).
func (s stored) rawTensor(view bool) (*tensor.Tensor, error) {
	rows := 1
	for _, d := range s.shape[:len(s.shape)-1] {
		rows *= d
	}
	rb := 0
	if rows > 0 {
		rb = len(s.data) / rows
	}
	src := s.data
	if s.unpermute > 0 {
		src = undoPermute(src, s.shape, s.unpermute)
	}
	if !view && s.unpermute == 0 {
		src = slices.Clone(src)
	}
	return tensor.New(src, rows, rb)
}

// undoPermute returns a copy of data with llama.cpp's Q/K row permutation
// undone. The converter (convert_hf_to_gguf.py, LlamaModel.permute) views
// the rows of each of n heads as (2, D/2) and swaps the two axes, so that
// the halves Hugging Face's rotate_half pairs (row i and row i + D/2 of a
// head) become adjacent rows 2i and 2i+1, which llama.cpp's interleaved
// rope pairs. Here Hugging Face row h·D + half·D/2 + i comes back from
// GGUF row h·D + 2i + half. Rows are moved whole, so quantized rows (one
// row of blocks per output feature) move the same way; a 1-D bias moves
// element by element.
func undoPermute(data []byte, shape []int, heads int) []byte {
	return permuteHalves(data, shape[0], heads, false)
}

// permuteHalves returns a copy of data, rows rows in heads heads, with
// llama.cpp's Q/K row permutation applied (interleave: each head's row i
// and row i + D/2 become rows 2i and 2i+1) or undone.
func permuteHalves(data []byte, rows, heads int, interleave bool) []byte {
	rowBytes := len(data) / max(rows, 1)
	d := rows / heads
	out := make([]byte, len(data))
	for h := range heads {
		for half := range 2 {
			for i := range d / 2 {
				split, paired := h*d+half*d/2+i, h*d+2*i+half
				dst, src := split, paired
				if interleave {
					dst, src = paired, split
				}
				copy(out[dst*rowBytes:(dst+1)*rowBytes], data[src*rowBytes:(src+1)*rowBytes])
			}
		}
	}
	return out
}
