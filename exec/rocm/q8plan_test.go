package rocm

import (
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/kernels"
)

// TestPlanQ8Layout: the two 8-bit activation layouts fill their scratch
// exactly, quants then steps then sums, as the quantizing kernels write
// them (loom_q8x: n int8, n/32 f32 steps, n/16 f32 sums of 16; loom_q8t:
// tiles of 8 rows, K/32·8 steps and sums of 32), and launch the grid and
// block their mat-vecs take.
func TestPlanQ8Layout(t *testing.T) {
	for _, c := range []struct{ M, K, N int64 }{{1, 256, 100}, {3, 4096, 14336}, {8, 1024, 17}, {2, 32, 1 << 24}} {
		n := c.M * c.K
		q := planQ8(dtype.BF16, c.M, c.K, c.N, false)
		if q.dx != n || q.sx != n+n/32*4 || q.bytes != q.sx+n/16*4 || q.tiled || q.count != &qmvQ8Launches {
			t.Errorf("dp4a %+v: %+v", c, q)
		}
		if want := uint32(min((c.N+kernels.QMVWordRowsPerBlock-1)/kernels.QMVWordRowsPerBlock, 65535*16)); q.grid != want || q.threads != kernels.QMVWordThreads {
			t.Errorf("dp4a %+v: grid %d × %d, want %d × %d", c, q.grid, q.threads, want, kernels.QMVWordThreads)
		}
		if name, _ := kernels.Q8XEntry(dtype.BF16); q.xname != name {
			t.Errorf("dp4a %+v: %s, want %s", c, q.xname, name)
		}
		m := planQ8(dtype.F16, c.M, c.K, c.N, true)
		if m.dx != 8*c.K || m.sx != m.dx+c.K/32*8*4 || m.bytes != m.sx+c.K/32*8*4 || !m.tiled || m.count != &qmvTLaunches {
			t.Errorf("mma %+v: %+v", c, m)
		}
		if want := uint32((c.N + kernels.QMVTRows - 1) / kernels.QMVTRows); m.grid != want || m.threads != kernels.QMVTThreads {
			t.Errorf("mma %+v: grid %d × %d, want %d × %d", c, m.grid, m.threads, want, kernels.QMVTThreads)
		}
		if name, _ := kernels.Q8TEntry(dtype.F16); m.xname != name {
			t.Errorf("mma %+v: %s, want %s", c, m.xname, name)
		}
	}
}
