package blas

// The OpenBLAS backend, loaded at run time with purego (no cgo): Debian's
// libopenblas0-pthread provides libopenblas.so.0 (LP64: 32-bit blasint; the
// ILP64 libopenblas64 is a different soname and not used). Decisions:
//   - The library is opened once per process (RTLD_NOW|RTLD_LOCAL, so its
//     cblas_* symbols do not interpose on other libraries) and every host
//     shares it; the loader and binder follow exec/rocm/hip/lib.go, copied
//     small here because blas sits below exec.
//   - openblas_set_num_threads is process-global. Each host keeps its own
//     thread count and re-applies it before a call when the last call came
//     from a host with another count, so hosts with different counts still
//     get theirs. Code elsewhere in the process that calls OpenBLAS (or
//     OPENBLAS_NUM_THREADS, which only sets the initial count) is not
//     accounted for. OpenMP builds ignore openblas_set_num_threads and follow
//     OMP_NUM_THREADS; Name reports the build's threading model.
//   - All calls are serialised by one process-wide mutex: the pthread build
//     serialises concurrent callers internally anyway (OpenMathLib/OpenBLAS
//     #4217) and a serial build is only thread-safe when built with
//     USE_LOCKING, so the mutex costs nothing on the first and makes the
//     second safe; waiting goroutines park instead of holding OS threads in C.
//   - Batches loop over items: Debian's 0.3.21 has no cblas_sgemm_batch
//     (nm -D lists only cblas_{s,d,c,z}gemm and *gemm3m).
//   - Dims and leading dimensions above 2³¹−1 are rejected (blasint is int).
//   - Every call gets the host's count, however small. Measured (session
//     44, the 2-core development VM, OpenBLAS 0.3.21 pthread): after a
//     call its idle workers spin (sched_yield, for its default thread
//     timeout of ~2²⁸ cycles) and took ~25% of the CPU samples of a 1B
//     Q4_K prefill from the executor's own workers. With the calls below
//     2²⁴ multiply-adds (or all of them) on one thread, so that the
//     workers stay asleep, that prefill took 1.24–1.29 s for 64 tokens
//     against 1.43–1.45 (256 tokens 4.9–5.4 s against 5.2–5.6; 512 no
//     different); but the tiny model's f32 decode, whose products are all
//     small, lost 3–8% with the calls below 2²⁶ on one thread (507–537
//     tokens/s against 544–555, three rounds alternating), and alone a
//     second thread is faster at every size measured (256×64×64: 24
//     against 34 µs). A short spin (OPENBLAS_THREAD_TIMEOUT=4 or 16, which
//     the library reads when it loads) made small calls slower still
//     (256×64×64 on 2 threads: 41–47 µs). Left as it was then.
//   - Since session 56 the executor's own loops run on helpers that spin
//     between loops (exec/cpu's team) instead of parking, and OpenBLAS's
//     spinning workers took their CPU: 31% of the samples of a SmolLM-135M
//     Q4_K_M prefill of 64 tokens were OpenBLAS's sched_yield, on 2 cores.
//     So a call of fewer than openblasSmall multiply-adds (an item of a
//     batch: the attention's per-head products) runs on one OpenBLAS
//     thread, and its workers sleep. loom bench -device cpu, three rounds
//     alternating, 64-token prompts: SmolLM-135M Q4_K_M prefill 370–502 ms
//     against 468–648; the tiny model's f32 decode 270–290 tokens/s
//     against 225–278 and its prefill 20–21 ms against 23–29; its Q4_K
//     decode 982–1,382 against 604–983.

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/loomgraph/loom/internal/dl"
)

// openblasSmall is the multiply-adds (M·N·K of one batch item) below which
// a call runs on one OpenBLAS thread.
const openblasSmall = 1 << 24

// openblasNames are the sonames tried, in order.
var openblasNames = []string{"libopenblas.so.0", "libopenblas.so"}

// CBLAS enum values (cblas.h).
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// openblasLib is the process's one binding of OpenBLAS.
type openblasLib struct {
	path   string
	config string // openblas_get_config()
	model  string // openblas_get_parallel(): "serial", "pthread" or "openmp"

	sgemm func(order, ta, tb, m, n, k int32, alpha float32, a *float32, lda int32,
		b *float32, ldb int32, beta float32, c *float32, ldc int32)
	dgemm func(order, ta, tb, m, n, k int32, alpha float64, a *float64, lda int32,
		b *float64, ldb int32, beta float64, c *float64, ldc int32)
	setNumThreads func(n int32)
	getConfig     func() *byte
	getParallel   func() int32

	mu      sync.Mutex // serialises every call into the library
	threads int        // the count last passed to setNumThreads; guarded by mu
}

var loadOpenBLAS = sync.OnceValues(func() (*openblasLib, error) {
	h, path, err := dlopen(openblasNames)
	if err != nil {
		return nil, err
	}
	l := &openblasLib{path: path}
	b := binder{lib: h, path: path}
	bind(&b, &l.sgemm, "cblas_sgemm")
	bind(&b, &l.dgemm, "cblas_dgemm")
	bind(&b, &l.setNumThreads, "openblas_set_num_threads")
	bind(&b, &l.getConfig, "openblas_get_config")
	bind(&b, &l.getParallel, "openblas_get_parallel")
	if err := b.err(); err != nil {
		return nil, err
	}
	l.config = strings.TrimSpace(cString(l.getConfig()))
	l.model = map[int32]string{0: "serial", 1: "pthread", 2: "openmp"}[l.getParallel()]
	return l, nil
})

type openblasHost struct {
	lib     *openblasLib
	threads int
}

// OpenOpenBLAS loads OpenBLAS (libopenblas.so.0, else libopenblas.so) and
// returns a backend whose calls run on threads OpenBLAS threads (threads < 1
// means 1; see the file comment on the count being process-global).
func OpenOpenBLAS(threads int) (Host, error) {
	l, err := loadOpenBLAS()
	if err != nil {
		return nil, err
	}
	return &openblasHost{lib: l, threads: max(1, threads)}, nil
}

func (h *openblasHost) Name() string {
	return fmt.Sprintf("openblas: %s (%s, %d threads)", h.lib.config, h.lib.model, h.threads)
}

func (h *openblasHost) Sgemm(c Call, a, b, cc []float32) error {
	return openblasRun(h, c, a, b, cc, func(ta, tb int32, it item[float32]) {
		h.lib.sgemm(cblasRowMajor, ta, tb, int32(c.M), int32(c.N), int32(c.K),
			float32(c.Alpha), &it.a[0], ld32(c.LDA), &it.b[0], ld32(c.LDB),
			float32(c.Beta), &it.c[0], ld32(c.LDC))
	})
}

func (h *openblasHost) Dgemm(c Call, a, b, cc []float64) error {
	return openblasRun(h, c, a, b, cc, func(ta, tb int32, it item[float64]) {
		h.lib.dgemm(cblasRowMajor, ta, tb, int32(c.M), int32(c.N), int32(c.K),
			c.Alpha, &it.a[0], ld32(c.LDA), &it.b[0], ld32(c.LDB),
			c.Beta, &it.c[0], ld32(c.LDC))
	})
}

func openblasRun[T float32 | float64](h *openblasHost, c Call, a, b, cc []T, gemm func(ta, tb int32, it item[T])) error {
	if done, err := prepare(c, a, b, cc); done {
		return err
	}
	for _, v := range []int{c.M, c.N, c.K, c.LDA, c.LDB, c.LDC} {
		if v > math.MaxInt32 {
			return &CallError{Call: c, Reason: "a dimension exceeds OpenBLAS's 32-bit int"}
		}
	}
	ta, tb := int32(cblasNoTrans), int32(cblasNoTrans)
	if c.TransA {
		ta = cblasTrans
	}
	if c.TransB {
		tb = cblasTrans
	}
	l := h.lib
	l.mu.Lock()
	defer l.mu.Unlock()
	threads := h.threads
	if float64(c.M)*float64(c.N)*float64(c.K) < openblasSmall {
		threads = 1 // its workers stay asleep (see the package notes)
	}
	if l.threads != threads {
		l.setNumThreads(int32(threads))
		l.threads = threads
	}
	for bi := range c.Batch {
		gemm(ta, tb, itemAt(c, bi, a, b, cc))
	}
	return nil
}

// ld32 passes a leading dimension as blasint, at least 1 as BLAS requires.
func ld32(ld int) int32 { return int32(max(1, ld)) }

// dlopen opens the first loadable library of candidates; the error lists
// every attempt as dlerror reported it.
func dlopen(candidates []string) (handle uintptr, path string, err error) {
	return dl.Open(candidates, dl.Now|dl.Local)
}

// binder binds the symbols of one library and collects the missing ones, so
// that a library lacking a symbol gives an error rather than a panic.
type binder struct {
	lib     uintptr
	path    string
	missing []string
}

func bind[F any](b *binder, fn *F, name string) {
	sym, err := purego.Dlsym(b.lib, name)
	if err != nil {
		b.missing = append(b.missing, name)
		return
	}
	purego.RegisterFunc(fn, sym)
}

func (b *binder) err() error {
	if len(b.missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s lacks %s", b.path, strings.Join(b.missing, ", "))
}

// cString copies a NUL-terminated C string.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
