package cpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/quant"
)

// Quantized steps (ir.ClassQuant) on the CPU, through package quant's
// codecs (bit-exact with GGML's reference code):
//
//   - dequantize: quant.Dequantize (f32), DequantizeF16, DequantizeBF16,
//     row by row, parallel over the executor's workers;
//   - qmatmul: GGML's CPU algorithm — each activation row is quantized to
//     the weight format's activation type (quant.ActivationType: Q8_0,
//     Q8_1 or Q8_K), and each output is the integer block dot product
//     quant.VecDot, so results equal GGML's CPU backend. (The GPU also
//     quantizes decode activations, per 32 values for every format, so
//     the two differ by their activations' rounding, as Candle's CUDA and
//     CPU backends do.) Work is split over output columns in chunks across
//     the workers.

// runQuant executes a dequantize or qmatmul step.
func (e *Executor) runQuant(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	n := k.Instrs[0].Node
	format, K := n.QuantFormat()
	rb, err := ir.QuantRowBytes(format, K)
	if err != nil {
		return fmt.Errorf("cpu: %s: %w", k.Name, err)
	}
	bytesOf := func(op plan.Operand, elem, count int) []byte {
		b := mem[op.Buf.ID].(*memory).b
		off := op.Layout.Offset * elem
		return b[off : off+count*elem]
	}
	out := mem[k.Out.ID].(*memory).b
	switch n.Op {
	case ir.OpDequantize:
		rows := n.Numel() / max(K, 1)
		raw := bytesOf(k.Ins[0], 1, rows*rb)
		sz := n.DType.Size()
		return e.parallelRows(ctx, rows, func(r0, r1 int) error {
			src := raw[r0*rb : r1*rb]
			dst := out[r0*K*sz : r1*K*sz]
			switch n.DType {
			case dtype.F32:
				return quant.Dequantize(format, src, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(dst))), (r1-r0)*K))
			case dtype.F16:
				return quant.DequantizeF16(format, src, unsafe.Slice((*dtype.Float16)(unsafe.Pointer(unsafe.SliceData(dst))), (r1-r0)*K))
			case dtype.BF16:
				return quant.DequantizeBF16(format, src, unsafe.Slice((*dtype.BFloat16)(unsafe.Pointer(unsafe.SliceData(dst))), (r1-r0)*K))
			}
			return fmt.Errorf("dequantize to %v", n.DType)
		})
	case ir.OpQMatmul:
		x := n.Args[0]
		M := x.Numel() / max(K, 1)
		N := n.Args[1].Shape[0]
		if M == 0 || N == 0 {
			return nil
		}
		sz := x.DType.Size()
		xs := bytesOf(k.Ins[0], sz, M*K)
		ws := bytesOf(k.Ins[1], 1, N*rb)
		act := quant.ActivationType(format)
		arb, err := act.RowBytes(int64(K))
		if err != nil {
			return fmt.Errorf("cpu: %s: activations: %w", k.Name, err)
		}
		// Quantize the activation rows once.
		acts := make([]byte, int64(M)*arb)
		if err := e.parallelRows(ctx, M, func(r0, r1 int) error {
			row := make([]float32, K)
			for m := r0; m < r1; m++ {
				loadRowF32(x.DType, xs, m*K, row)
				if err := quant.Quantize(act, row, acts[int64(m)*arb:int64(m+1)*arb]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("cpu: %s: quantize activations to %v: %w", k.Name, act, err)
		}
		return e.parallelRows(ctx, N, func(n0, n1 int) error {
			vals, valsB := make([]float32, n1-n0), []float32(nil)
			if M > 1 {
				valsB = make([]float32, n1-n0)
			}
			store := func(m int, vals []float32) { storeRowF32(n.DType, out, m*N+n0, vals) }
			m := 0
			// A prompt's rows two at a time: each weight block unpacked
			// once for both where the CPU has such a kernel (Q4_K with
			// AVX2; quant.VecDotRows2), VecDot's bits either way.
			for ; m+1 < M; m += 2 {
				a, b := acts[int64(m)*arb:int64(m+1)*arb], acts[int64(m+1)*arb:int64(m+2)*arb]
				if err := quant.VecDotRows2(format, ws[n0*rb:n1*rb], act, a, b, K, vals, valsB); err != nil {
					return fmt.Errorf("cpu: %s: %w", k.Name, err)
				}
				store(m, vals)
				store(m+1, valsB)
			}
			for ; m < M; m++ {
				arow := acts[int64(m)*arb : int64(m+1)*arb]
				// The chunk's rows at once: VecDot's bits, two rows at a
				// time where the CPU has a two-row kernel (quant.VecDotRows).
				if err := quant.VecDotRows(format, ws[n0*rb:n1*rb], act, arow, K, vals); err != nil {
					return fmt.Errorf("cpu: %s: %w", k.Name, err)
				}
				store(m, vals)
			}
			return nil
		})
	}
	return fmt.Errorf("cpu: %s: not a quantized op", k.Name)
}

// parallelRows runs f over [0, n) in contiguous chunks on the executor's
// workers, stopping at the first error or when ctx is done.
func (e *Executor) parallelRows(ctx context.Context, n int, f func(r0, r1 int) error) error {
	if n == 0 {
		return nil
	}
	w := max(1, min(e.workers, n))
	if w == 1 {
		// One worker (a decode step's one activation row, or a 1-worker
		// executor): the work on this goroutine, without a group, a
		// channel and a goroutine to hand it over; the context checked
		// between chunks all the same.
		chunk := max(1, (n+3)/4)
		for r0 := 0; r0 < n; r0 += chunk {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := f(r0, min(n, r0+chunk)); err != nil {
				return err
			}
		}
		return nil
	}
	chunk := max(1, (n+4*w-1)/(4*w))
	var (
		next   atomic.Int64
		failed atomic.Pointer[error]
	)
	parallel(w, func(int) {
		for failed.Load() == nil {
			if err := ctx.Err(); err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
			r0 := int(next.Add(int64(chunk)) - int64(chunk))
			if r0 >= n {
				return
			}
			if err := f(r0, min(n, r0+chunk)); err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
		}
	})
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

// loadFloat reads element i of a float array of dtype d.
func loadFloat(d dtype.DType, b []byte, i int) float64 {
	switch d {
	case dtype.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	case dtype.F16:
		return float64(dtype.Float16(binary.LittleEndian.Uint16(b[2*i:])).Float32())
	case dtype.BF16:
		return float64(dtype.BFloat16(binary.LittleEndian.Uint16(b[2*i:])).Float32())
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
}

// loadRowF32 fills dst with elements [i, i+len(dst)) of a float array of
// d, each as loadFloat gives it (rounded to float32: exact but for f64);
// f32, f16 and bf16 without the per-element switch.
func loadRowF32(d dtype.DType, b []byte, i int, dst []float32) {
	switch d {
	case dtype.F32:
		bb := b[4*i : 4*(i+len(dst))]
		for j := range dst {
			dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(bb[4*j:]))
		}
	case dtype.F16:
		bb := b[2*i : 2*(i+len(dst))]
		for j := range dst {
			dst[j] = dtype.Float16(binary.LittleEndian.Uint16(bb[2*j:])).Float32()
		}
	case dtype.BF16:
		bb := b[2*i : 2*(i+len(dst))]
		for j := range dst {
			dst[j] = dtype.BFloat16(binary.LittleEndian.Uint16(bb[2*j:])).Float32()
		}
	default:
		for j := range dst {
			dst[j] = float32(loadFloat(d, b, i+j))
		}
	}
}

// storeRowF32 writes vals as elements [i, i+len(vals)) of a float array of
// d, each as storeFloat writes it; f32, f16 and bf16 without the
// per-element switch and float64 round trip (a one-row product's 14,336
// bf16 outputs through storeFloat were ~9% of W13-q4_0's CPU time in a
// profile, session 49; the run 1.06–1.19 ms against 1.13–1.24, three
// rounds alternating: within this VM's noise).
func storeRowF32(d dtype.DType, b []byte, i int, vals []float32) {
	switch d {
	case dtype.F32:
		bb := b[4*i : 4*(i+len(vals))]
		for j, v := range vals {
			binary.LittleEndian.PutUint32(bb[4*j:], math.Float32bits(v))
		}
	case dtype.F16:
		bb := b[2*i : 2*(i+len(vals))]
		for j, v := range vals {
			binary.LittleEndian.PutUint16(bb[2*j:], uint16(dtype.ToF16(v)))
		}
	case dtype.BF16:
		bb := b[2*i : 2*(i+len(vals))]
		for j, v := range vals {
			binary.LittleEndian.PutUint16(bb[2*j:], uint16(dtype.ToBF16(v)))
		}
	default:
		for j, v := range vals {
			storeFloat(d, b, i+j, float64(v))
		}
	}
}

// storeFloat writes v, rounded once, as element i of a float array of d.
func storeFloat(d dtype.DType, b []byte, i int, v float64) {
	switch d {
	case dtype.F32:
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case dtype.F16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(dtype.ToF16(float32(v))))
	case dtype.BF16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(dtype.ToBF16(float32(v))))
	default:
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
}
