package rocm

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/loomgraph/loom/kernels"
)

// TestGPUTranspose runs every batched transpose of 2-byte elements
// (kernels.TransposeEntries), in both tile orders, that fits each shape — partial tiles in
// either side, sides under a tile, more matrices than grid.y holds —
// over distinct element values into a poisoned output, and checks every
// element of the result, and that nothing past the output was written.
func TestGPUTranspose(t *testing.T) {
	e := openGPU(t)
	for _, m := range []chlMove{
		{1, 16, 16}, {3, 24, 40}, {2, 136, 72}, {2, 200, 264}, {4, 256, 3136 / 4}, {3, 3136 / 4, 256},
		{2, 18, 34}, {1, 33, 17}, {2, 256, 9}, {70000, 8, 16}, {1, 8, 8}, {3, 100, 15}, {5, 7, 1}, {70000, 24, 3},
	} {
		n := m.numel()
		host := make([]uint16, n)
		for i := range host {
			host[i] = uint16(i*2654435761>>7) ^ uint16(i)
		}
		size := int64(2 * n)
		in, err := e.alloc.alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.alloc.alloc(size + 64)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.dev.MemcpyHtoD(in.ptr, unsafe.Pointer(&host[0]), uint64(size), e.stream); err != nil {
			t.Fatal(err)
		}
		for entry, name := range kernels.TransposeEntries {
			even, eight := m.r%2 == 0 && m.c%2 == 0, m.r%8 == 0 && m.c%8 == 0
			if (entry == kernels.TrB2x2 && !even) || (entry == kernels.TrB2x8 && !eight) || (entry == kernels.TrB2s && m.c >= 16) {
				continue
			}
			for _, rev := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%dx%dx%d/rev=%v", name, m.b, m.r, m.c, rev), func(t *testing.T) {
					if err := e.dev.MemsetD8(out.ptr, 0xff, uint64(size+64), e.stream); err != nil {
						t.Fatal(err)
					}
					if err := e.transposeWith(entry, m, in.ptr, out.ptr, rev, nil, nil); err != nil {
						t.Fatal(err)
					}
					got := make([]uint16, n+32)
					if err := e.dev.MemcpyDtoH(unsafe.Pointer(&got[0]), out.ptr, uint64(size+64), e.stream); err != nil {
						t.Fatal(err)
					}
					bad := 0
					for b := int64(0); b < m.b; b++ {
						for r := 0; r < m.r; r++ {
							for c := 0; c < m.c; c++ {
								i := (b*int64(m.r)+int64(r))*int64(m.c) + int64(c)
								o := (b*int64(m.c)+int64(c))*int64(m.r) + int64(r)
								if got[o] != host[i] && bad < 5 {
									t.Errorf("out[%d][%d][%d] = %#x, want in[%d][%d][%d] = %#x", b, c, r, got[o], b, r, c, host[i])
									bad++
								}
							}
						}
					}
					for i := n; i < n+32; i++ {
						if got[i] != 0xffff {
							t.Fatalf("element %d past the output written: %#x", i-n, got[i])
						}
					}
				})
			}
		}
		e.releaseScratch(in)
		e.releaseScratch(out)
	}
}
