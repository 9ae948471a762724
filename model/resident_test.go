package model

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
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
