package blas

// The pure-Go backend: gonum's native BLAS (gonum.org/v1/gonum/blas/gonum),
// always available, ~15× slower than OpenBLAS on large products
// (/work/shared/blas-conv-quant.md §2.1). Decisions:
//   - gonum.Implementation is called directly (not blas32/blas64, whose
//     package-level Use would make the choice process-global). It is
//     row-major like Call, so no operand swapping is needed.
//   - Parallelism: one item large enough for gonum to split it (at least
//     minParBlocks 64×64 blocks of C, gonum's own blockSize/minParBlock)
//     runs gonum's parallel kernel, which uses up to GOMAXPROCS goroutines
//     and cannot be bounded by threads. Items smaller than that run serially
//     inside gonum, so a batch of them is spread over at most threads
//     goroutines in contiguous chunks (errgroup).

import (
	"fmt"

	"golang.org/x/sync/errgroup"
	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gonum's sgemm/dgemm go parallel when C has at least minParBlocks blocks of
// gonumBlock×gonumBlock (gonum/blas/gonum/gonum.go: blockSize = 64,
// minParBlock = 4).
const (
	gonumBlock   = 64
	minParBlocks = 4
)

type gonumHost struct {
	threads int
}

// OpenGonum returns the gonum backend; batches of small items are spread
// over at most threads goroutines (threads < 1 means 1).
func OpenGonum(threads int) Host {
	return &gonumHost{threads: max(1, threads)}
}

func (g *gonumHost) Name() string {
	return fmt.Sprintf("gonum (%d threads)", g.threads)
}

func (g *gonumHost) Sgemm(c Call, a, b, cc []float32) error {
	return gonumRun(g, c, a, b, cc, func(it item[float32]) {
		gonum.Implementation{}.Sgemm(trans(c.TransA), trans(c.TransB), c.M, c.N, c.K,
			float32(c.Alpha), it.a, c.LDA, it.b, c.LDB, float32(c.Beta), it.c, c.LDC)
	})
}

func (g *gonumHost) Dgemm(c Call, a, b, cc []float64) error {
	return gonumRun(g, c, a, b, cc, func(it item[float64]) {
		gonum.Implementation{}.Dgemm(trans(c.TransA), trans(c.TransB), c.M, c.N, c.K,
			c.Alpha, it.a, c.LDA, it.b, c.LDB, c.Beta, it.c, c.LDC)
	})
}

func gonumRun[T float32 | float64](g *gonumHost, c Call, a, b, cc []T, gemm func(item[T])) error {
	if done, err := prepare(c, a, b, cc); done {
		return err
	}
	blocks := ceilDiv(c.M, gonumBlock) * ceilDiv(c.N, gonumBlock)
	workers := min(g.threads, c.Batch)
	if workers <= 1 || blocks >= minParBlocks {
		for bi := range c.Batch {
			gemm(itemAt(c, bi, a, b, cc))
		}
		return nil
	}
	var eg errgroup.Group
	for w := range workers {
		lo, hi := c.Batch*w/workers, c.Batch*(w+1)/workers
		eg.Go(func() error {
			for bi := lo; bi < hi; bi++ {
				gemm(itemAt(c, bi, a, b, cc))
			}
			return nil
		})
	}
	return eg.Wait()
}

func trans(t bool) gblas.Transpose {
	if t {
		return gblas.Trans
	}
	return gblas.NoTrans
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
