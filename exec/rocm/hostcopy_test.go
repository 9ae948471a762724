package rocm

import (
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUHostCopy: copies to the host through the pinned staging buffer
// come back byte for byte, for a tensor of one element, one that fills
// the buffer exactly, and one that takes three chunks with a ragged end;
// the executor reports whether it stages.
func TestGPUHostCopy(t *testing.T) {
	e := freshGPU(t)
	if err := e.dev.CanPin(); err != nil {
		t.Logf("no pinned memory: copies go straight to the host (%v)", err)
	}
	rng := rand.New(rand.NewPCG(30, 1))
	for _, n := range []int{1, stageBytes / 4, 2*stageBytes/4 + 12345} {
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = rng.Float32()*2 - 1
		}
		h, err := tensor.New(vals, n)
		if err != nil {
			t.Fatal(err)
		}
		d, err := e.FromHost(h)
		if err != nil {
			t.Fatal(err)
		}
		back, err := d.ToHost()
		d.Free()
		if err != nil {
			t.Fatalf("%d floats: %v", n, err)
		}
		if back.DType() != dtype.F32 {
			t.Fatalf("%d floats: came back as %v", n, back.DType())
		}
		got, err := tensor.Values[float32](back)
		if err != nil {
			t.Fatal(err)
		}
		for i := range vals {
			if got[i] != vals[i] {
				t.Fatalf("%d floats: element %d is %v, want %v", n, i, got[i], vals[i])
			}
		}
	}
	if err := e.dev.CanPin(); err == nil && e.stage.buf == nil {
		t.Errorf("the device pins memory, but the copies did not stage: %v", e.stage.err)
	}
}
