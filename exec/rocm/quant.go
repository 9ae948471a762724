package rocm

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/quant"
)

// Quantized steps on the GPU (kernels/quant.hip):
//
//   - dequantize: one kernel, one thread per output element, GGML's
//     formulas (bit-exact with package quant's Go twins);
//   - qmatmul with at most kernels.QMVMaxRows activation rows (decode):
//     for Q4_0, Q8_0, Q4_K, Q5_K and Q6_K the activations are quantized to 8
//     bits per 32-value block (loom_q8x_*, into scratch) and the mat-vec
//     multiplies 4 weights by 4 activations per integer dot product
//     (loom_qmvq_*), as Candle's and ggml's mmvq do — one row in one
//     launch that quantizes too (loom_qmvf_*), 2 to 8 rows on NVIDIA
//     sm_80+ on the tensor cores' integer MMA (loom_qmvt_*); the other formats
//     (and LOOM_QMV=word or bytewise) take a mat-vec that reads each
//     weight block once and multiplies the dequantized weights with the
//     activations in f32;
//   - qmatmul with more rows (prefill): the weight rows are dequantized to
//     the activations' dtype in chunks of at most qmatmulScratch bytes and
//     multiplied on the GEMM engine of matmul steps (cuBLAS, rocBLAS or the
//     portable GEMM), accumulating in f32.
//
// Decode products on the 8-bit path differ from the f32 product by the
// activations' rounding, as the CPU's (GGML's Q8 activations) do; the two
// round differently (per 32 values on the GPU, GGML's block sizes on the
// CPU), as Candle's CUDA and CPU results do.

// qmatmulScratch bounds the dequantized weight chunk of a prefill qmatmul.
var qmatmulScratch int64 = 256 << 20

// quantKey keys a quantized step's readiness in plan.Kernel.Cache.
type quantKey struct{}

// supportsQuant says whether a quantized step runs on the GPU.
func (e *Executor) supportsQuant(k *plan.Kernel) error {
	return supportsQuantNode(k.Instrs[0].Node)
}

// supportsQuantNode says whether quantized op n (a dequantize or a
// qmatmul) runs on the GPU.
func supportsQuantNode(n *ir.Node) error {
	f, _ := n.QuantFormat()
	if n.Op == ir.OpDequantize {
		_, err := kernels.DequantEntry(f, n.DType)
		return err
	}
	_, err := kernels.QMVEntry(f, n.DType)
	return err
}

// prepareQuant compiles and loads the quantized kernels (and opens the
// GEMM engine a prefill product uses).
func (e *Executor) prepareQuant(k *plan.Kernel) error {
	if _, ok := k.Cache.Load(plan.KeyOf(e, quantKey{})); ok {
		return nil
	}
	if err := e.supportsQuant(k); err != nil {
		return err
	}
	n := k.Instrs[0].Node
	f, _ := n.QuantFormat()
	name, _ := kernels.DequantEntry(f, n.DType)
	if _, err := e.quantFunction(name); err != nil {
		return err
	}
	if n.Op == ir.OpQMatmul {
		if st := e.gemm(); st.vendor == nil {
			if _, err := e.gemmFunction(kernels.GemmEntries()[0]); err != nil {
				return err
			}
		}
	}
	k.Cache.Store(plan.KeyOf(e, quantKey{}), true)
	return nil
}

func (e *Executor) quantFunction(name string) (hip.Function, error) {
	return e.libFunction("loom_quant", kernels.QuantSource, name)
}

// dequantBytewise makes dequantizations use the byte-wise kernels
// (loom_dequant_*) even where a word-load one (loom_dequantw_*, Q4_K) or
// one with 8 outputs a thread (loom_dequant8_*, the rest) would run:
// LOOM_DEQUANT=bytewise, for comparing them. Tests set it directly.
var dequantBytewise = os.Getenv("LOOM_DEQUANT") == "bytewise"

// dequantWordLaunches and dequant8Launches count word-load and 8-a-thread
// dequantizations queued (tests).
var dequantWordLaunches, dequant8Launches atomic.Int64

// qmvBytewise makes decode-sized quantized products use the byte-wise
// mat-vec kernels (loom_qmv_*) even where a word-load kernel
// (loom_qmvw_*) exists: LOOM_QMV=bytewise, for comparing the two. Tests
// set it directly.
var qmvBytewise = os.Getenv("LOOM_QMV") == "bytewise"

// qmvF32 makes decode-sized quantized products multiply in f32 (the
// word-load or byte-wise kernels) instead of on 8-bit activations:
// LOOM_QMV=word (or bytewise). Tests set it directly.
var qmvF32 = qmvBytewise || os.Getenv("LOOM_QMV") == "word"

// qmvTwoLaunch makes decode products on 8-bit activations quantize them in
// a launch of their own (loom_q8x, then loom_qmvq) where the one-launch
// kernel (loom_qmvf) would run: LOOM_QMV=q8x, for comparing the two. Tests
// set it directly.
var qmvTwoLaunch = os.Getenv("LOOM_QMV") == "q8x"

// qmvfPath caps the path of the one-launch one-row mat-vec (loom_qmvf):
// LOOM_QMV=chunks keeps it to 32-weight chunks (kernels.QMVFChunks),
// LOOM_QMV=units to units read from global memory (no staging), for
// comparing them; -1, the default, lets kernels.QMVFPathFor pick. Tests
// set it directly.
var qmvfPath = func() int {
	switch os.Getenv("LOOM_QMV") {
	case "chunks":
		return kernels.QMVFChunks
	case "units":
		return kernels.QMVFUnits
	}
	return -1
}()

// qmvNoMMA makes decode products of 2 or more rows use the dp4a mat-vec
// (loom_qmvq) where the tensor cores' (loom_qmvt) would run:
// LOOM_QMV=dp4a, for comparing the two. Tests set it directly.
var qmvNoMMA = os.Getenv("LOOM_QMV") == "dp4a"

// qmvWordLaunches, qmvQ8Launches, qmvFLaunches and qmvTLaunches count
// word-load, 8-bit (two-launch dp4a), one-launch and tensor-core mat-vec
// launches (tests check the path they mean to test was taken).
var qmvWordLaunches, qmvQ8Launches, qmvFLaunches, qmvTLaunches atomic.Int64

// runQuant queues a quantized step.
func (e *Executor) runQuant(k *plan.Kernel, mem []exec.Memory) error {
	if err := e.prepareQuant(k); err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	n := k.Instrs[0].Node
	f, K := n.QuantFormat()
	rb, err := ir.QuantRowBytes(f, K)
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	if n.Numel() == 0 {
		return nil
	}
	ptr := func(op plan.Operand, elem int64, count int64) (hip.DevPtr, error) {
		return e.span(mem, op.Buf, int(elem), op.Layout.Offset, int(count))
	}
	outOp := plan.Operand{Buf: k.Out, Layout: ir.Contiguous(n.Shape)}
	size := int64(n.DType.Size())
	out, err := ptr(outOp, size, int64(n.Numel()))
	if err != nil {
		return fmt.Errorf("rocm: %s output: %w", k.Name, err)
	}
	if n.Op == ir.OpDequantize {
		rows := int64(n.Numel() / K)
		raw, err := ptr(k.Ins[0], 1, rows*int64(rb))
		if err != nil {
			return fmt.Errorf("rocm: %s input: %w", k.Name, err)
		}
		return e.dequant(f, n.DType, raw, out, int64(n.Numel()))
	}
	x := n.Args[0]
	M := int64(x.Numel() / K)
	N := int64(n.Args[1].Shape[0])
	xp, err := ptr(k.Ins[0], size, M*int64(K))
	if err != nil {
		return fmt.Errorf("rocm: %s activations: %w", k.Name, err)
	}
	wp, err := ptr(k.Ins[1], 1, N*int64(rb))
	if err != nil {
		return fmt.Errorf("rocm: %s weight: %w", k.Name, err)
	}
	if M <= kernels.QMVMaxRows {
		if fname, ok := qmvfFor(n, M, wp); ok {
			fn, err := e.quantFunction(fname)
			if err != nil {
				return err
			}
			return e.qmvF(k.Name, fname, f, fn, wp, xp, out, int64(K), N, int64(rb), nil)
		}
		if tname, ok := e.qmvtFor(n, M, wp); ok {
			return e.qmvQ8(k.Name, tname, n.DType, wp, xp, out, M, int64(K), N, int64(rb), true)
		}
		if qname, ok := kernels.QMVQEntry(f, n.DType, int(M)); ok && !qmvF32 && K%32 == 0 {
			if uint64(wp)%uint64(kernels.QMVQAlign(f)) == 0 {
				return e.qmvQ8(k.Name, qname, n.DType, wp, xp, out, M, int64(K), N, int64(rb), false)
			}
		}
		name, err := kernels.QMVEntry(f, n.DType)
		if err != nil {
			return err
		}
		var a hip.Args
		a.Ptr(wp).Ptr(xp).Ptr(out).I32(int32(M)).I64(int64(K)).I64(N)
		threads, rows := kernels.QMVThreads, kernels.QMVRowsPerBlock
		if wname, align, ok := kernels.QMVWordEntry(f, n.DType, int(M)); ok && !qmvBytewise &&
			uint64(wp)%uint64(align) == 0 && uint64(xp)%16 == 0 && (int64(K)*size)%16 == 0 {
			name, threads, rows = wname, kernels.QMVWordThreads, kernels.QMVWordRowsPerBlock
			a.I64(int64(rb))
			qmvWordLaunches.Add(1)
		}
		a.I64(int64(K)).I64(N)
		fn, err := e.quantFunction(name)
		if err != nil {
			return err
		}
		grid := [3]uint32{uint32(min((N+int64(rows)-1)/int64(rows), 65535*16)), 1, 1}
		e.launchMu.Lock()
		defer e.launchMu.Unlock()
		if err := e.launchDep(fn, grid, [3]uint32{uint32(threads), 1, 1}, 0, &a); err != nil {
			return fmt.Errorf("rocm: %s: launch %s: %w", k.Name, name, err)
		}
		e.launches.Add(1)
		return nil
	}
	// Prefill: dequantize chunks of weight rows, then out[:, n0:n0+c] =
	// x · chunkᵀ. A chunk smaller than the weight is a multiple of 64
	// rows: W13's prefill product in three pieces of 4,779 rows took 0.60
	// ms, in four of 3,584 rows 0.158, whole 0.146 (H200, cuBLAS 13.1, in
	// the two-stream trial below; a GEMM over an odd count of rows is the
	// likely cause, not checked apart from it).
	//
	// Tried and taken back (H200, W13p-q4_k, two rounds alternating in
	// one call): the weight in 2, 3 or 4 pieces, a second stream
	// dequantizing piece i+1 (events ordering the streams) while the GEMM
	// multiplied piece i. 0.148, 0.60 and 0.158 ms against 0.146 serial:
	// cuBLAS's GEMM holds every multiprocessor's shared memory, so the
	// dequantization's blocks waited for it and nothing overlapped.
	//
	// Also tried and taken back (session 37, H200, W13p-q4_k, three rounds
	// alternating in one call, branch wip/qprefill-overlap): the weight's
	// last ROWS rows dequantized on the whole device and multiplied by
	// cuBLAS held to the other multiprocessors (cublasSetSmCountTarget),
	// while a second stream dequantized the first rows on SMS
	// multiprocessors (blocks of 1024 threads, one a multiprocessor), then
	// those multiplied on the whole device: ROWS,SMS = 5888,40 0.155–0.156
	// ms against 0.136–0.137 serial; 5888,24 0.195, 4096,40 0.168, 7168,48
	// 0.176–0.178. The GEMM held to fewer multiprocessors loses more than
	// the overlap saves.
	chunk := max(1, min(N, qmatmulScratch/(int64(K)*size)))
	if chunk < N && chunk > 64 {
		chunk -= chunk % 64
	}
	scratch, err := e.alloc.alloc(chunk * int64(K) * size)
	if err != nil {
		return fmt.Errorf("rocm: %s: dequantized weight chunk: %w", k.Name, err)
	}
	defer e.releaseScratch(scratch)
	for n0 := int64(0); n0 < N; n0 += chunk {
		c := min(chunk, N-n0)
		if err := e.dequant(f, n.DType, wp+hip.DevPtr(n0*int64(rb)), scratch.ptr, c*int64(K)); err != nil {
			return fmt.Errorf("rocm: %s: %w", k.Name, err)
		}
		call := blas.Call{M: int(M), N: int(c), K: K, TransB: true, LDA: K, LDB: K, LDC: int(N), Batch: 1, Alpha: 1}
		if err := e.runGemm(n.DType, call, xp, scratch.ptr, out+hip.DevPtr(n0*size), false, false); err != nil {
			return fmt.Errorf("rocm: %s (%s): %w", k.Name, e.GEMMBackend(), err)
		}
	}
	return nil
}

// q8Plan is how a decode product on 8-bit activations lays its quantized
// activations out in scratch and launches its two kernels: loom_q8x's
// row-major form for the dp4a mat-vec, or loom_q8t's tiles for the tensor
// cores'.
type q8Plan struct {
	xname   string        // the quantizing kernel
	bytes   int64         // the scratch it fills
	dx, sx  int64         // the steps' and the sums' offsets in it (the quants at 0)
	tiled   bool          // loom_q8t: K follows the count among its arguments
	threads uint32        // the mat-vec's block
	grid    uint32        // and grid
	count   *atomic.Int64 // the mat-vec's counter
}

// planQ8 is the q8Plan of an M×K by N×K product with activations of
// dtype dt, on the tensor cores with mma.
func planQ8(dt dtype.DType, M, K, N int64, mma bool) q8Plan {
	if mma {
		xname, _ := kernels.Q8TEntry(dt)
		// qt [K/32][8][32], dt and st [K/32][8]; a block a tile of 16
		// rows (qmvtFor bounds the tiles).
		return q8Plan{xname: xname, bytes: kernels.Q8TBytes(K), dx: 8 * K, sx: 9 * K, tiled: true,
			threads: kernels.QMVTThreads,
			grid:    uint32((N + kernels.QMVTRows - 1) / kernels.QMVTRows), count: &qmvTLaunches}
	}
	xname, _ := kernels.Q8XEntry(dt)
	n, rows := M*K, int64(kernels.QMVWordRowsPerBlock)
	// The kernel walks further rows grid-stride.
	return q8Plan{xname: xname, bytes: kernels.Q8XBytes(n), dx: n, sx: n + n/32*4,
		threads: kernels.QMVWordThreads,
		grid:    uint32(min((N+rows-1)/rows, 65535*16)), count: &qmvQ8Launches}
}

// qmvQ8 queues a decode product on 8-bit activations: x [M, K] quantized
// into scratch, then the mat-vec qname over it: loom_q8x_* and the dp4a
// kernel (loom_qmvq_*), or with mma loom_q8t_* and the tensor cores'
// (loom_qmvt_*).
func (e *Executor) qmvQ8(step, qname string, dt dtype.DType, wp, xp, out hip.DevPtr, M, K, N, rowBytes int64, mma bool) error {
	q := planQ8(dt, M, K, N, mma)
	qx, err := e.quantFunction(q.xname)
	if err != nil {
		return err
	}
	fn, err := e.quantFunction(qname)
	if err != nil {
		return err
	}
	scratch, err := e.alloc.alloc(q.bytes)
	if err != nil {
		return fmt.Errorf("rocm: %s: 8-bit activations: %w", step, err)
	}
	defer e.releaseScratch(scratch) // stream-ordered: reused only by later work
	qa := scratch.ptr
	dx, sx := qa+hip.DevPtr(q.dx), qa+hip.DevPtr(q.sx)
	n := M * K
	var a hip.Args
	a.Ptr(xp).Ptr(qa).Ptr(dx).Ptr(sx).I64(n / 4)
	if q.tiled {
		a.I64(K)
	}
	grid, blk := kernels.FlatLaunch(int(n / 4))
	var b hip.Args
	b.Ptr(wp).Ptr(qa).Ptr(dx).Ptr(sx).Ptr(out).I32(int32(M)).I64(K).I64(N).I64(rowBytes).I64(N)
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	if err := e.launchDep(qx, grid, blk, 0, &a); err != nil {
		return fmt.Errorf("rocm: %s: launch %s: %w", step, q.xname, err)
	}
	if err := e.launchDep(fn, [3]uint32{q.grid, 1, 1}, [3]uint32{q.threads, 1, 1}, 0, &b); err != nil {
		return fmt.Errorf("rocm: %s: launch %s: %w", step, qname, err)
	}
	e.launches.Add(2)
	q.count.Add(1)
	return nil
}

// qmvtFor names the tensor-core mat-vec (loom_qmvt_*) for qmatmul n with
// M activation rows and its weight at wp, or ok = false where it does not
// apply: one row (the one-launch kernel's), a format or device without
// one, LOOM_QMV set to another path, K not a multiple of the format's
// step, weight rows not aligned as it reads them, or more row tiles than
// a grid holds.
func (e *Executor) qmvtFor(n *ir.Node, M int64, wp hip.DevPtr) (string, bool) {
	f, K := n.QuantFormat()
	if M < 2 || M > kernels.QMVMaxRows || qmvF32 || qmvNoMMA || K%kernels.QMVTStep(f) != 0 {
		return "", false
	}
	name, ok := kernels.QMVTEntry(f, n.DType, e.target)
	N := int64(n.Args[1].Shape[0])
	if !ok || uint64(wp)%uint64(kernels.QMVTAlign(f)) != 0 || (N+kernels.QMVTRows-1)/kernels.QMVTRows > 1<<31-1 {
		return "", false
	}
	return name, true
}

// qmvfFor names the one-launch mat-vec (loom_qmvf_*) for qmatmul n with M
// activation rows and its weight at wp, or ok = false where it does not
// apply: more than one row, a format without one, LOOM_QMV set to another
// path, K not a multiple of the format's chunk, the activations' 8-bit
// form too large for shared memory, or weight rows not aligned as the
// 8-bit mat-vecs read them.
func qmvfFor(n *ir.Node, M int64, wp hip.DevPtr) (string, bool) {
	f, K := n.QuantFormat()
	if M != 1 || qmvF32 || qmvTwoLaunch || K%32 != 0 {
		return "", false
	}
	if align := kernels.QMVFAlign(f); align == 0 || uint64(wp)%uint64(align) != 0 {
		return "", false
	}
	fname, ok := kernels.QMVFEntry(f, n.DType)
	if !ok || K%kernels.QMVFChunk(f) != 0 || kernels.QMVFSharedBytes(int64(K)) > kernels.QMVFMaxShared {
		return "", false
	}
	return fname, true
}

// qmvF queues a one-row product on 8-bit activations of weight format f
// as one launch of fn (loom_qmvf_*, or its fused form with extra, the
// fused kernel's operand pointers, after its own arguments): every block
// quantizes x into its shared memory, then its groups of 32 lanes walk the
// weight rows (kernels.QMVFRowsPerGroup at a time). The grid is as many
// blocks as the device holds at once (hip.Device.ActiveBlocks, cached per
// kernel), or fewer where the rows run out.
func (e *Executor) qmvF(step, name string, f quant.Type, fn hip.Function, wp, xp, out hip.DevPtr, K, N, rowBytes int64, extra []hip.DevPtr) error {
	path := e.qmvfPathFor(f, K, wp)
	shared := kernels.QMVFShared(f, K, path)
	threads := kernels.QMVFThreadsFor(f, path)
	resident, err := e.activeBlocks(fn, threads, shared)
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", step, err)
	}
	rows := int64(threads / 32 * kernels.QMVFRowsPerGroup(f, K, path))
	// Tried and taken back (session 49, H200, the 1B-shaped model's Q4_K
	// decode, two rounds alternating in one call): products whose rows
	// give fewer blocks than multiprocessors (the output projection's
	// 2,048 rows of 2,048 weights: 64 blocks of 256; q/k/v's 3,072: 96)
	// in blocks of 128 or 64 threads instead, so that more
	// multiprocessors read their weight: median step 522.1 / 521.1 µs
	// (128) and 539.4 / 539.0 (64) against 519.3 / 519.5. A small
	// product's time is its round trips, not its share of the bandwidth;
	// more blocks only quantize x more times.
	grid := [3]uint32{uint32(max(1, min((N+rows-1)/rows, int64(resident)*int64(e.info.MultiProcessors), 65535))), 1, 1}
	var a hip.Args
	a.Ptr(wp).Ptr(xp).Ptr(out).I64(K).I64(N).I64(rowBytes).I32(int32(path))
	for _, p := range extra {
		a.Ptr(p)
	}
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	if err := e.launchDep(fn, grid, [3]uint32{uint32(threads), 1, 1}, uint32(shared), &a); err != nil {
		return fmt.Errorf("rocm: %s: launch %s: %w", step, name, err)
	}
	e.launches.Add(1)
	qmvFLaunches.Add(1)
	return nil
}

// qmvfPathFor is the path a loom_qmvf launch takes for format f, K and
// weight pointer wp (kernels.QMVFPathFor, capped by LOOM_QMVF_PATH).
func (e *Executor) qmvfPathFor(f quant.Type, K int64, wp hip.DevPtr) int {
	path := kernels.QMVFPathFor(f, K, uint64(wp)%16 == 0, e.target)
	if qmvfPath >= 0 {
		path = min(path, qmvfPath)
	}
	return path
}

// activeBlocks is hip.Device.ActiveBlocks, remembered per kernel and shared
// memory size; at least 1.
func (e *Executor) activeBlocks(fn hip.Function, threads int, shared int64) (int, error) {
	type key struct {
		name    string
		threads int
		shared  int64
	}
	k := key{fn.Name(), threads, shared}
	if v, ok := e.occupancy.Load(k); ok {
		return v.(int), nil
	}
	n, err := e.dev.ActiveBlocks(fn, threads, uint64(shared))
	if err != nil {
		return 0, err
	}
	n = max(n, 1)
	e.occupancy.Store(k, n)
	return n, nil
}

// dequant queues the dequantization of count elements of format f at raw
// into out (dtype d).
func (e *Executor) dequant(f quant.Type, d dtype.DType, raw, out hip.DevPtr, count int64) error {
	name, err := kernels.DequantEntry(f, d)
	if err != nil {
		return err
	}
	per := int64(4) // outputs a thread
	if dequantWord(f, d, raw, out, count) {
		name, _ = kernels.DequantWordEntry(f, d)
		per = 32
		dequantWordLaunches.Add(1)
	} else if w, ok := kernels.Dequant8Entry(f, d); ok && out%16 == 0 && count%8 == 0 && !dequantBytewise {
		name, per = w, 8
		dequant8Launches.Add(1)
	}
	fn, err := e.quantFunction(name)
	if err != nil {
		return err
	}
	var a hip.Args
	a.Ptr(raw).Ptr(out).I64(count)
	grid, blk := kernels.FlatLaunch(int(count / per))
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	if err := e.launchDep(fn, grid, blk, 0, &a); err != nil {
		return fmt.Errorf("launch %s: %w", name, err)
	}
	e.launches.Add(1)
	return nil
}
