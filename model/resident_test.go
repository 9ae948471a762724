package model

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// residentCPU is the CPU executor in the shape of the GPU's for Load: a
// resident executor (exec.Resident) whose Upload copies the tensor's bytes
// before it returns, so that Load uploads weights straight from the
// checkpoint's mapping, which it closes before it returns.
type residentCPU struct {
	*cpu.Executor
	uploads int
}

// residentTensor is a value of residentCPU: its memory.
type residentTensor struct {
	e *residentCPU
	m exec.Memory
	b *plan.Buffer
}

func (t *residentTensor) DType() dtype.DType              { return t.b.DType }
func (t *residentTensor) Shape() []int                    { return slices.Clone(t.b.Shape) }
func (t *residentTensor) Owner() exec.Executor            { return t.e }
func (t *residentTensor) ToHost() (*tensor.Tensor, error) { return t.e.Download(t.m, t.b) }

func (e *residentCPU) Upload(t *tensor.Tensor) (exec.Memory, error) {
	e.uploads++
	c, err := tensor.Zeros(t.DType(), t.Shape()...)
	if err != nil {
		return nil, err
	}
	copy(c.Bytes(), t.Bytes())
	return e.Executor.Upload(c)
}

func (e *residentCPU) Adopt(v exec.Value) (exec.Memory, bool, error) {
	t, ok := v.(*residentTensor)
	if !ok || t.e != e {
		return nil, false, nil
	}
	return t.m, true, nil
}

func (e *residentCPU) Wrap(m exec.Memory, b *plan.Buffer) (exec.ResidentValue, error) {
	return &residentTensor{e: e, m: m, b: b}, nil
}

// TestLoadResident: on a resident executor Load uploads every weight
// (read from the checkpoint's mapping in place, quantized, float in the
// compute dtype, or converted to it) and the model computes what it
// computes on the CPU, bit for bit, after Load has closed the file. (With
// an Upload that aliased the tensor instead of copying it, the runs read
// the unmapped file and fault: the uploads are the mapping's bytes.)
func TestLoadResident(t *testing.T) {
	dir, w, _ := tiny(t)
	q4 := filepath.Join(t.TempDir(), "tiny-q4k.gguf")
	if err := WriteGGUF(q4, TinyConfig(), w, quant.Q4_K); err != nil {
		t.Fatal(err)
	}
	prompt, more := randomIDs(21, 9, TinyConfig().Vocab), []int{3, 500, 17}
	for _, c := range []struct {
		name, path string
		dt         dtype.DType
	}{
		{"f32 safetensors", dir, dtype.F32},
		{"f32 safetensors as bf16", dir, dtype.BF16},
		{"Q4_K GGUF", q4, dtype.F32},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := prefillDecode(t, load(t, c.path, Options{DType: c.dt}), prompt, more)
			e := &residentCPU{Executor: cpu.New()}
			m := load(t, c.path, Options{Executor: e, DType: c.dt})
			if e.uploads != len(m.values) {
				t.Errorf("%d uploads for %d weights and tables", e.uploads, len(m.values))
			}
			for name, v := range m.values {
				if _, ok := v.(*residentTensor); !ok {
					t.Fatalf("%s is a %T, not resident", name, v)
				}
			}
			got := prefillDecode(t, m, prompt, more)
			if len(got) != len(want) {
				t.Fatalf("%d rows of logits, want %d", len(got), len(want))
			}
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("row %d of the logits differs from the CPU's", i)
				}
			}
		})
	}
}

// donorCPU is residentCPU with the GPU's two other abilities a greedy
// chain uses: outputs written into given resident values (exec.Donor,
// with exec.WithOutputs) and host tensors written into resident ones
// (exec.HostWriter, counted). Its WriteHost gives the value a fresh
// upload of src rather than writing the old memory: the CPU binds no
// addresses, so only what the run reads matters.
type donorCPU struct {
	residentCPU
	writes int
}

func (e *donorCPU) Disown(v exec.Value) error {
	t, ok := v.(*residentTensor)
	if !ok || t.e != &e.residentCPU {
		return fmt.Errorf("disown %T: not a tensor of this executor", v)
	}
	t.m = nil
	return nil
}

func (e *donorCPU) WriteHost(v exec.Value, src *tensor.Tensor) error {
	t, ok := v.(*residentTensor)
	if !ok || t.e != &e.residentCPU || t.m == nil {
		return fmt.Errorf("write host data into %T: not a live tensor of this executor", v)
	}
	if src.DType() != t.b.DType || !slices.Equal(src.Shape(), t.b.Shape) {
		return fmt.Errorf("write host data %v%v into %v%v", src.DType(), src.Shape(), t.b.DType, t.b.Shape)
	}
	m, err := e.residentCPU.Upload(src)
	if err != nil {
		return err
	}
	t.m = m
	e.writes++
	return nil
}

// TestGreedyChainHostWriter: greedy Generate on an executor that chains
// its decode steps through kept pairs of token and position buffers
// (exec.Donor) and writes a Generate's first token and position into the
// pair its next step reads (exec.HostWriter: Session.hostIntoPair, so
// that on the GPU every step of a second Generate replays a recorded
// binding) gives the CPU's tokens, Generate after Generate and prompt
// after prompt; each Generate after the first writes its first step's
// token and position (the first Generate has no pairs yet). Which pair it
// writes shows in the GPU's bindings only (exec/rocm's
// TestGPUStableChain); swapping the token and the position fails here.
func TestGreedyChainHostWriter(t *testing.T) {
	dir, _, _ := tiny(t)
	want := load(t, dir, Options{})
	e := &donorCPU{residentCPU: residentCPU{Executor: cpu.New()}}
	m := load(t, dir, Options{Executor: e})
	ctx := context.Background()
	opts := GenerateOptions{MaxTokens: 12, StopTokens: []int{}}
	for i, prompt := range [][]int{randomIDs(31, 7, TinyConfig().Vocab), randomIDs(32, 7, TinyConfig().Vocab), randomIDs(33, 11, TinyConfig().Vocab)} {
		w, err := want.Generate(ctx, prompt, opts)
		if err != nil {
			t.Fatal(err)
		}
		before := e.writes
		g, err := m.Generate(ctx, prompt, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g.Tokens, w.Tokens) {
			t.Fatalf("Generate %d: %v, the CPU's %v", i, g.Tokens, w.Tokens)
		}
		if i > 0 && e.writes-before != 2 {
			t.Errorf("Generate %d: %d host writes, want 2 (the first step's token and position)", i, e.writes-before)
		}
	}
}

// TestDecodeProbes: the decode graph's measurement probes (Options.probe,
// for TestGPUSpeed1B's LOOM_LLAMA_PROBE) do what they say: tiny-step adds
// a step a layer between the scatter and the attention and leaves the
// tokens as they were; no-norm takes two steps a layer away, no-attention
// one; one-layer keeps the steps and reads layer 0's weights only;
// dropping the output projection takes a product a layer away (its
// residual add then runs as a step of its own).
func TestDecodeProbes(t *testing.T) {
	dir, _, _ := tiny(t)
	prompt := randomIDs(41, 9, TinyConfig().Vocab)
	opts := GenerateOptions{MaxTokens: 12, StopTokens: []int{}}
	// decodeSteps is the steps of m's decode program (one sequence, the
	// first window).
	decodeSteps := func(m *Model) []*plan.Step {
		p, _, err := m.decodeProgram(ctx, decodeKey{1, m.decodeWindow(16)})
		if err != nil {
			t.Fatal(err)
		}
		return p.Plan().Steps
	}
	// steps counts a decode program's steps and its products.
	steps := func(m *Model) (n, products int) {
		ss := decodeSteps(m)
		for _, s := range ss {
			for _, in := range s.Kernel.Instrs {
				if in.Node.Op == ir.OpMatmul || in.Node.Op == ir.OpQMatmul {
					products++
					break
				}
			}
		}
		return len(ss), products
	}
	base := load(t, dir, Options{})
	want, err := base.Generate(ctx, prompt, opts)
	if err != nil {
		t.Fatal(err)
	}
	twice := load(t, dir, Options{probe: probeTinyStep})
	got, err := twice.Generate(ctx, prompt, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tokens, want.Tokens) {
		t.Errorf("%s: tokens %v, want %v", probeTinyStep, got.Tokens, want.Tokens)
	}
	layers := TinyConfig().Layers
	n, products := steps(base)
	if s, _ := steps(twice); s != n+layers {
		t.Errorf("%s: %d decode steps, want %d + %d", probeTinyStep, s, n, layers)
	}
	// Each attention step follows the probe's step, which follows the
	// cache's scatter.
	ss, attn := decodeSteps(twice), 0
	for i, s := range ss {
		if op := s.Kernel.Instrs[0].Node.Op; op != ir.OpAttention {
			continue
		}
		attn++
		if i < 2 || ss[i-2].Kernel.Instrs[0].Node.Op != ir.OpScatter || ss[i-1].Kernel.Instrs[len(ss[i-1].Kernel.Instrs)-1].Node.Op != ir.OpSub {
			t.Errorf("%s: step %d (%s) does not follow a scatter and the probe's step", probeTinyStep, i, s.Kernel.Name)
		}
	}
	if attn != layers {
		t.Errorf("%s: %d attention steps, want %d", probeTinyStep, attn, layers)
	}
	// Each layer's attention in the plain decode step reads its new key
	// and value from the q/k/v product's output (plan.Kernel.NewKV);
	// behind the probe's step, none does.
	newKV := func(m *Model) int {
		n := 0
		for _, s := range decodeSteps(m) {
			if s.Kernel.NewKV != nil {
				n++
			}
		}
		return n
	}
	if n := newKV(base); n != layers {
		t.Errorf("decode step: %d attention steps read the new key and value ahead, want %d", n, layers)
	}
	if n := newKV(twice); n != 0 {
		t.Errorf("%s: %d attention steps read the new key and value ahead, want 0", probeTinyStep, n)
	}
	if s, _ := steps(load(t, dir, Options{probe: probeNoNorm})); s != n-2*layers {
		t.Errorf("%s: %d decode steps, want %d − 2·%d", probeNoNorm, s, n, layers)
	}
	// One layer's weights for all: the same steps, and no step reads
	// another layer's weight.
	one := load(t, dir, Options{probe: probeOneLayer})
	if s, p := steps(one); s != n || p != products {
		t.Errorf("%s: %d decode steps and %d products, want %d and %d", probeOneLayer, s, p, n, products)
	}
	read := 0
	for _, st := range decodeSteps(one) {
		for _, in := range st.Kernel.Ins {
			if name := in.Buf.Name; strings.HasPrefix(name, "blk.") {
				read++
				if !strings.HasPrefix(name, "blk.0.") {
					t.Errorf("%s: step %s reads %s", probeOneLayer, st.Kernel.Name, name)
				}
			}
		}
	}
	if read == 0 {
		t.Errorf("%s: no step reads a layer's weight", probeOneLayer)
	}
	if s, _ := steps(load(t, dir, Options{probe: probeNoAttention})); s != n-layers {
		t.Errorf("%s: %d decode steps, want %d − %d", probeNoAttention, s, n, layers)
	}
	if _, p := steps(load(t, dir, Options{probe: probeNoOutProj})); p != products-layers {
		t.Errorf("%s: %d products in a decode step, want %d − %d", probeNoOutProj, p, products, layers)
	}
}
