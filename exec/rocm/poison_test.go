package rocm

import (
	"bytes"
	"sync"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/plan"
)

// TestGPUWithPoison: views with different poison bytes allocate at the same
// time on one executor, each filling its own memory with its own byte, and
// the executor's own setting (0xFF) is unchanged.
func TestGPUWithPoison(t *testing.T) {
	e := openGPU(t)
	const n = 1 << 16
	buf := &plan.Buffer{DType: dtype.U8, Shape: []int{n}}
	check := func(x exec.Executor, kind plan.BufferKind, want byte) {
		t.Helper()
		m, err := x.Alloc(n, kind)
		if err != nil {
			t.Errorf("%v: Alloc: %v", x, err)
			return
		}
		defer x.Free(m)
		h, err := x.Download(m, buf)
		if err != nil {
			t.Errorf("%v: Download: %v", x, err)
			return
		}
		if !bytes.Equal(h.Bytes(), bytes.Repeat([]byte{want}, n)) {
			t.Errorf("%v: kind %v memory is not all 0x%02X", x, kind, want)
		}
	}
	var wg sync.WaitGroup
	for _, b := range []byte{0x00, 0x5A, 0xA5, 0xEE} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := e.WithPoison(b)
			for range 20 {
				check(v, plan.BufTemp, b)
				check(v, plan.BufOutput, b)
			}
		}()
	}
	wg.Wait()
	check(e, plan.BufOutput, 0xFF)
}
