#include "textflag.h"

// The few-row product rows (hgemv.go): out[i] = Σ_j x[j]·w[i·ldw+j]
// over j < k (k a positive multiple of 8), w's f16 or bf16 values widened
// exactly to float32 as they are read (or float32 read as they are), x float32, the products added with
// fused multiply-adds in four eight-lane float32 accumulators (32 values
// an iteration, then 8 at a time), which are added at the end
// ((a0 + a1) + (a2 + a3), then the lanes pairwise).

// BF16W widens the eight bf16 at addr into the float32 lanes of Y.
#define BF16W(addr, Y) \
	VPMOVZXWD addr, Y \
	VPSLLD    $16, Y, Y

// F16W widens the eight f16 at addr into the float32 lanes of Y.
#define F16W(addr, Y) \
	VCVTPH2PS addr, Y

// F32W loads eight float32 at addr into Y.
#define F32W(addr, Y) \
	VMOVUPS addr, Y

// HROWS is the row loop, WIDEN the load of eight values, G their bytes:
// R8 the rows, R11 ldw in bytes, R9 the row count, R12 x, DX k, R10 out.
#define HROWS(WIDEN, G, ROW, L32, L8, SUM) \
ROW:                                 \
	MOVQ   R8, SI                    \
	MOVQ   R12, DI                   \
	MOVQ   DX, CX                    \
	VXORPS Y0, Y0, Y0                \
	VXORPS Y1, Y1, Y1                \
	VXORPS Y2, Y2, Y2                \
	VXORPS Y3, Y3, Y3                \
	CMPQ   CX, $32                   \
	JLT    L8                        \
L32:                                 \
	PREFETCHT0  1024(SI)             \
	WIDEN(0(SI), Y4)                 \
	WIDEN(G(SI), Y5)                 \
	WIDEN(2*G(SI), Y6)               \
	WIDEN(3*G(SI), Y7)               \
	VFMADD231PS 0(DI), Y4, Y0        \
	VFMADD231PS 32(DI), Y5, Y1       \
	VFMADD231PS 64(DI), Y6, Y2       \
	VFMADD231PS 96(DI), Y7, Y3       \
	ADDQ        $(4*G), SI           \
	ADDQ        $128, DI             \
	SUBQ        $32, CX              \
	CMPQ        CX, $32              \
	JGE         L32                  \
	TESTQ       CX, CX               \
	JZ          SUM                  \
L8:                                  \
	WIDEN(0(SI), Y4)                 \
	VFMADD231PS 0(DI), Y4, Y0        \
	ADDQ        $G, SI               \
	ADDQ        $32, DI              \
	SUBQ        $8, CX               \
	JNZ         L8                   \
SUM:                                 \
	VADDPS       Y1, Y0, Y0          \
	VADDPS       Y3, Y2, Y2          \
	VADDPS       Y2, Y0, Y0          \
	VEXTRACTF128 $1, Y0, X1          \
	VADDPS       X1, X0, X0          \
	VHADDPS      X0, X0, X0          \
	VHADDPS      X0, X0, X0          \
	VMOVSS       X0, (R10)           \
	ADDQ         $4, R10             \
	ADDQ         R11, R8             \
	DECQ         R9                  \
	JNZ          ROW                 \
	VZEROUPPER                       \
	RET

// func hdotRowsBF16(w *uint16, ldw, n int, x *float32, k int, out *float32)
TEXT ·hdotRowsBF16(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R8
	MOVQ ldw+8(FP), R11
	SHLQ $1, R11
	MOVQ n+16(FP), R9
	MOVQ x+24(FP), R12
	MOVQ k+32(FP), DX
	MOVQ out+40(FP), R10
	HROWS(BF16W, 16, bfrow, bf32, bf8, bfsum)

// func hdotRowsF16(w *uint16, ldw, n int, x *float32, k int, out *float32)
TEXT ·hdotRowsF16(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R8
	MOVQ ldw+8(FP), R11
	SHLQ $1, R11
	MOVQ n+16(FP), R9
	MOVQ x+24(FP), R12
	MOVQ k+32(FP), DX
	MOVQ out+40(FP), R10
	HROWS(F16W, 16, hfrow, hf32, hf8, hfsum)

// func hdotRowsF32(w *float32, ldw, n int, x *float32, k int, out *float32)
TEXT ·hdotRowsF32(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R8
	MOVQ ldw+8(FP), R11
	SHLQ $2, R11
	MOVQ n+16(FP), R9
	MOVQ x+24(FP), R12
	MOVQ k+32(FP), DX
	MOVQ out+40(FP), R10
	HROWS(F32W, 32, f32row, f3232, f328, f32sum)
