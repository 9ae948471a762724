#include "textflag.h"

// AVX2 (+F16C) versions of ten VecDot twins (vecdot.go). They are exact
// replicas, not approximations: the integer sums are computed exactly (no
// int16 saturation is possible with the operand ranges below, whatever the
// bytes), and the float32 operations are the twin's, one by one, in the
// twin's order (scalar VMULSS/VADDSS, or 8-lane VMULPS/VADDPS where the twin
// keeps eight independent lanes). No FMA is used.
//
// Integer technique. VPMADDUBSW multiplies unsigned by signed bytes and adds
// adjacent pairs into int16. The unsigned operand is always a raw code
// (Q4: 0…15, Q6: 0…63), so a pair sum is at most 2·63·128 = 16128; GGML's
// offsets (−8 for Q4_0, −32 for Q6_K) are applied as −k·Σy, computed by a
// second VPMADDUBSW of the constant k with y. Q8_0·Q8_0 has two signed
// operands and sign-extends to int16 first (VPMOVSXBW + VPMADDWD), which is
// exact for −128 too (the VPSIGNB trick is not).
//
// Lane order for the k-quants. The twins accumulate eight int32 lanes, lane
// l taking the elements whose index is l mod 8. For 32 consecutive elements
// e0…e31 (two 16-element groups a = e0…e15, b = e16…e31), VPERMD by
// [0 2 4 6 1 3 5 7] then VPSHUFB by [0 4 8 12 1 5 9 13 2 6 10 14 3 7 11 15]
// (per 128-bit half) orders the bytes as
//	e0 e8 e16 e24  e1 e9 e17 e25 … e3 e11 e19 e27 | e4 e12 e20 e28 … e7 e15 e23 e31
// so VPMADDUBSW yields the int16 words pa0 pb0 pa1 pb1 … pa7 pb7, where
// pa_l = e_l + e_(l+8) products and pb_l the same in group b, and VPMADDWD
// with the dword (scale_a, scale_b) yields the int32 lane contributions
// scale_a·pa_l + scale_b·pb_l in lane order 0…7.

DATA nib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nib<>(SB), RODATA|NOPTR, $32

DATA eights<>+0(SB)/8, $0x0808080808080808
DATA eights<>+8(SB)/8, $0x0808080808080808
DATA eights<>+16(SB)/8, $0x0808080808080808
DATA eights<>+24(SB)/8, $0x0808080808080808
GLOBL eights<>(SB), RODATA|NOPTR, $32

DATA thirtytwos<>+0(SB)/8, $0x2020202020202020
DATA thirtytwos<>+8(SB)/8, $0x2020202020202020
DATA thirtytwos<>+16(SB)/8, $0x2020202020202020
DATA thirtytwos<>+24(SB)/8, $0x2020202020202020
GLOBL thirtytwos<>(SB), RODATA|NOPTR, $32

DATA hi2<>+0(SB)/8, $0x3030303030303030
DATA hi2<>+8(SB)/8, $0x3030303030303030
DATA hi2<>+16(SB)/8, $0x3030303030303030
DATA hi2<>+24(SB)/8, $0x3030303030303030
GLOBL hi2<>(SB), RODATA|NOPTR, $32

DATA threes<>+0(SB)/8, $0x0303030303030303
DATA threes<>+8(SB)/8, $0x0303030303030303
DATA threes<>+16(SB)/8, $0x0303030303030303
DATA threes<>+24(SB)/8, $0x0303030303030303
GLOBL threes<>(SB), RODATA|NOPTR, $32

DATA fours<>+0(SB)/8, $0x0404040404040404
DATA fours<>+8(SB)/8, $0x0404040404040404
DATA fours<>+16(SB)/8, $0x0404040404040404
DATA fours<>+24(SB)/8, $0x0404040404040404
GLOBL fours<>(SB), RODATA|NOPTR, $32

DATA sixteens<>+0(SB)/8, $0x1010101010101010
DATA sixteens<>+8(SB)/8, $0x1010101010101010
DATA sixteens<>+16(SB)/8, $0x1010101010101010
DATA sixteens<>+24(SB)/8, $0x1010101010101010
GLOBL sixteens<>(SB), RODATA|NOPTR, $32

// VPSHUFB mask: byte i of each half ← byte 2h + i/8 of the dword
// broadcast in it (h the half), so bit i of Q5's 32-bit qh is bit i mod 8
// of byte i.
DATA qhbytes<>+0(SB)/8, $0x0000000000000000
DATA qhbytes<>+8(SB)/8, $0x0101010101010101
DATA qhbytes<>+16(SB)/8, $0x0202020202020202
DATA qhbytes<>+24(SB)/8, $0x0303030303030303
GLOBL qhbytes<>(SB), RODATA|NOPTR, $32

// Byte k of every 8 has every bit but bit k set: ORed with qhbytes'
// bytes, a byte is 0xff exactly where its bit k is.
DATA qhbit<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA qhbit<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA qhbit<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA qhbit<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL qhbit<>(SB), RODATA|NOPTR, $32

DATA onesw<>+0(SB)/8, $0x0001000100010001
DATA onesw<>+8(SB)/8, $0x0001000100010001
DATA onesw<>+16(SB)/8, $0x0001000100010001
DATA onesw<>+24(SB)/8, $0x0001000100010001
GLOBL onesw<>(SB), RODATA|NOPTR, $32

// VPERMD indices [0 2 4 6 1 3 5 7].
DATA permidx<>+0(SB)/4, $0
DATA permidx<>+4(SB)/4, $2
DATA permidx<>+8(SB)/4, $4
DATA permidx<>+12(SB)/4, $6
DATA permidx<>+16(SB)/4, $1
DATA permidx<>+20(SB)/4, $3
DATA permidx<>+24(SB)/4, $5
DATA permidx<>+28(SB)/4, $7
GLOBL permidx<>(SB), RODATA|NOPTR, $32

// VPSHUFB mask [0 4 8 12 1 5 9 13 2 6 10 14 3 7 11 15] in both halves.
DATA lanemask<>+0(SB)/8, $0x0d0905010c080400
DATA lanemask<>+8(SB)/8, $0x0f0b07030e0a0602
DATA lanemask<>+16(SB)/8, $0x0d0905010c080400
DATA lanemask<>+24(SB)/8, $0x0f0b07030e0a0602
GLOBL lanemask<>(SB), RODATA|NOPTR, $32

// PF is how far ahead of the weights being read the Q4_0 and Q8_0 loops
// ask for them (PREFETCHT0, bytes). Measured on this project's 2-core CI
// machine (a read of memory: 19–21 GB/s), binaries with and without it run
// alternately on W13: Q4_0 (two-row kernel) 12–14 GB/s against 8–9, Q8_0
// 18–22 against 15–19; the hardware prefetcher alone left each core
// waiting on its row. The two-row kernel advances each row 72 bytes an
// iteration, more than a cache line, so it asks for two lines a row (a few
// percent more, A/B: 13–16 against 12–15 GB/s). The Q4_K and Q6_K loops
// were slower with it (10 against 11–17 GB/s), so they go without (the
// AVX-512 Q6_K row kernel, twice as fast, takes it: see there). Tried
// again for Q4_K in session 49 on a 2-core Zen 4 VM (read 47 GB/s): three
// lines a block PF ahead in dotRowsQ4_KQ8_KAVX2P, W13-q4_k 1.34–1.39 ms
// against 1.39–1.41 without, three rounds alternating: the same within
// the VM's noise. There the kernel streams ~12 GB/s a core, about its
// in-cache rate: its arithmetic, not the memory, bounds it.
#define PF 4608

// HSUM8 adds the eight int32 of Y into the low dword of X (T is scratch).
#define HSUM8(Y, X, T) \
	VEXTRACTI128 $1, Y, T \
	VPADDD       T, X, X  \
	VPSHUFD      $0x4e, X, T \
	VPADDD       T, X, X  \
	VPSHUFD      $0xb1, X, T \
	VPADDD       T, X, X

// The row kernels (dotRows*) keep the rows left in cnt-40(SP) and each
// output pointer in a frame slot. ROWSTORE stores row sum X at the output
// pointer in slot OUT and advances it; ROWNEXT moves the weight row
// register ROW on by rb and loops to LABEL while rows are left. Clobber AX.
#define ROWSTORE(X, OUT) \
	MOVQ   OUT, AX    \
	VMOVSS X, (AX)    \
	ADDQ   $4, AX     \
	MOVQ   AX, OUT

#define ROWNEXT(ROW, LABEL) \
	ADDQ rb+8(FP), ROW \
	DECQ cnt-40(SP)    \
	JNZ  LABEL

// F16 loads the f16 at addr into the low float32 of X (R is a scratch GPR).
#define F16(addr, R, X) \
	MOVWLZX   addr, R \
	VMOVD     R, X    \
	VCVTPH2PS X, X

// Q80BLOCK adds one Q8_0 block's product to X7: sumi = Σ x·y over the
// block at SI and the block at DI (int32, exact), X7 += float32(sumi)·(dx·dy),
// and moves SI and DI to the next blocks (AX, BX, Y0–Y3 scratch).
#define Q80BLOCK \
	VPMOVSXBW 2(SI), Y0    \
	VPMOVSXBW 18(SI), Y1   \
	VPMOVSXBW 2(DI), Y2    \
	VPMOVSXBW 18(DI), Y3   \
	VPMADDWD  Y2, Y0, Y0   \
	VPMADDWD  Y3, Y1, Y1   \
	VPADDD    Y1, Y0, Y0   \
	HSUM8(Y0, X0, X1)      \
	VCVTDQ2PS X0, X0       \
	F16((SI), AX, X1)      \
	F16((DI), BX, X2)      \
	VMULSS    X2, X1, X1   \
	VMULSS    X1, X0, X0   \
	VADDSS    X0, X7, X7   \
	ADDQ      $34, SI      \
	ADDQ      $34, DI

// func dotRowsQ8_0Q8_0AVX2(x *byte, rb, n int, y *byte, nb int, out *float32)
//
// Per block: sumi = Σ x·y (int32, exact); sumf += float32(sumi)·(dx·dy);
// out[i] = row i's sumf, for n rows of rb bytes from x. The row loop is
// here rather than a call and a Go loop a row (dotRowsQ4_KQ8_KAVX2P's
// reason); a single row (VecDot) is n = 1.
TEXT ·dotRowsQ8_0Q8_0AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), R13
	MOVQ n+16(FP), R9
	MOVQ out+40(FP), R10

q80row:
	MOVQ   R13, SI
	MOVQ   y+24(FP), DI
	MOVQ   nb+32(FP), CX
	VXORPS X7, X7, X7

q80loop:
	PREFETCHT0 PF(SI)
	Q80BLOCK
	DECQ      CX
	JNZ       q80loop

	VMOVSS X7, (R10)
	ADDQ   $4, R10
	ADDQ   rb+8(FP), R13
	DECQ   R9
	JNZ    q80row

	VZEROUPPER
	RET

// Q40Y loads the Q8_0 block DI+yoff's 32 quants into Y2 and their offset
// term 8·Σy (pairs of int16) into Y4, for Q40ROW.
#define Q40Y(yoff) \
	VMOVDQU    yoff+2(DI), Y2 \
	VPMADDUBSW Y2, Y14, Y4

// Q40ROW computes the int32 lanes of Q4_0 block X+xoff against the Q8_0
// block in Y2 and Y4 (Q40Y) into DST (Σ q·y − 8·Σy, in eight partial
// sums), X the base register of the weights. Clobbers Y0, Y1, Y3.
#define Q40ROW(X, xoff, DST) \
	VMOVDQU     xoff+2(X), X0 \
	VPSRLW      $4, X0, X1     \
	VINSERTI128 $1, X1, Y0, Y0 \
	VPAND       Y15, Y0, Y0    \
	VPMADDUBSW  Y2, Y0, Y3     \
	VPSUBW      Y4, Y3, Y3     \
	VPMADDWD    Y13, Y3, DST

// Q40INT is Q40ROW for one weight row against the Q8_0 block DI+yoff.
// Clobbers Y0–Y4.
#define Q40INT(X, xoff, yoff, DST) \
	Q40Y(yoff)          \
	Q40ROW(X, xoff, DST)

// F16X4 loads the f16 at addr+0, +stride, +2·stride, +3·stride into the
// four low float32 of X (R is a scratch GPR).
#define F16X4(addr, o1, o2, o3, R, X) \
	MOVWLZX   addr, R        \
	VMOVD     R, X           \
	VPINSRW   $1, o1, X, X   \
	VPINSRW   $2, o2, X, X   \
	VPINSRW   $3, o3, X, X   \
	VCVTPH2PS X, X

// func dotQ4_0Q8_0AVX2(x, y *byte, nb int) float32
//
// Per block: sumi = Σ q·y − 8·Σy with q the raw nibbles (elements 0…15 in
// the low nibbles, 16…31 in the high ones); sumf += (float32(sumi)·dx)·dy.
// Four blocks at a time: their integer sums side by side (VPHADDD), the
// four products (float32(sumi)·dx)·dy as one VMULPS pair (the same
// roundings lane by lane), then added to sumf one after another in block
// order, as the twin does; the rest one block at a time.
TEXT ·dotQ4_0Q8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ    x+0(FP), SI
	MOVQ    y+8(FP), DI
	MOVQ    nb+16(FP), CX
	VMOVDQU nib<>(SB), Y15
	VMOVDQU eights<>(SB), Y14
	VMOVDQU onesw<>(SB), Y13
	VXORPS  X7, X7, X7
	CMPQ    CX, $4
	JLT     q40tail

q40quad:
	PREFETCHT0 PF(SI)
	Q40INT(SI, 0, 0, Y8)
	Q40INT(SI, 18, 34, Y9)
	Q40INT(SI, 36, 68, Y10)
	Q40INT(SI, 54, 102, Y11)
	VPHADDD      Y9, Y8, Y8     // a01 a23 b01 b23 | a45 a67 b45 b67
	VPHADDD      Y11, Y10, Y10  // c… d…
	VPHADDD      Y10, Y8, Y8    // a0123 b0123 c0123 d0123 | a4567 …
	VEXTRACTI128 $1, Y8, X9
	VPADDD       X9, X8, X8     // the four blocks' sumi
	VCVTDQ2PS    X8, X0
	F16X4(0(SI), 18(SI), 36(SI), 54(SI), AX, X1)
	F16X4(0(DI), 34(DI), 68(DI), 102(DI), BX, X2)
	VMULPS       X1, X0, X0     // sumi·dx
	VMULPS       X2, X0, X0     // ·dy
	VADDSS       X0, X7, X7
	VMOVSHDUP    X0, X3
	VADDSS       X3, X7, X7
	VMOVHLPS     X0, X0, X4
	VADDSS       X4, X7, X7
	VPSHUFD      $3, X0, X5
	VADDSS       X5, X7, X7
	ADDQ         $72, SI
	ADDQ         $136, DI
	SUBQ         $4, CX
	CMPQ         CX, $4
	JGE          q40quad

q40tail:
	TESTQ CX, CX
	JZ    q40done

q40loop:
	Q40INT(SI, 0, 0, Y3)
	HSUM8(Y3, X3, X4)
	VCVTDQ2PS   X3, X0         // float32(sumi)
	F16((SI), AX, X1)
	F16((DI), BX, X2)
	VMULSS      X1, X0, X0     // sumi·dx
	VMULSS      X2, X0, X0     // ·dy
	VADDSS      X0, X7, X7
	ADDQ        $18, SI
	ADDQ        $34, DI
	DECQ        CX
	JNZ         q40loop

q40done:
	VMOVSS     X7, ret+24(FP)
	VZEROUPPER
	RET

// Q4CODES loads the 16 qs bytes at addr as 32 codes in element order
// into Y0 (elements 0…15 the low nibbles, 16…31 the high ones). Y15 holds
// the nibble mask; clobbers X1.
#define Q4CODES(addr) \
	VMOVDQU     addr, X0       \
	VPSRLW      $4, X0, X1     \
	VINSERTI128 $1, X1, Y0, Y0 \
	VPAND       Y15, Y0, Y0

// Q5HIGH ORs into the codes Y0 their fifth bits: bit i of the 32-bit qh
// at addr is element i's, 16 when set. Y12 holds qhbytes, Y11 qhbit,
// Y10 sixteens; clobbers Y5, Y6.
#define Q5HIGH(addr) \
	VPBROADCASTD addr, Y5  \
	VPSHUFB      Y12, Y5, Y5 \
	VPOR         Y11, Y5, Y5 \
	VPCMPEQB     Y6, Y6, Y6 \
	VPCMPEQB     Y6, Y5, Y5 \
	VPAND        Y10, Y5, Y5 \
	VPOR         Y5, Y0, Y0

// Q5CONSTS loads the constants the Q5_0 and Q5_1 loops keep in registers:
// Y15 the nibble mask, Y13 onesw, Y12 qhbytes, Y11 qhbit, Y10 sixteens.
#define Q5CONSTS \
	VMOVDQU nib<>(SB), Y15      \
	VMOVDQU onesw<>(SB), Y13    \
	VMOVDQU qhbytes<>(SB), Y12  \
	VMOVDQU qhbit<>(SB), Y11    \
	VMOVDQU sixteens<>(SB), Y10

// Q41INT, Q50INT and Q51INT compute the eight int32 lanes of the block at
// SI+xoff (Q4_1, Q5_0, Q5_1) against the activation block at DI+yoff
// (Q8_1, Q8_0, Q8_1) into DST: Σ q·y (Q5_0: − 16·Σy) in eight partial
// sums, exact (codes of at most 5 bits: a VPMADDUBSW pair is at most
// 2·31·128, Q5_0's offset term 2·16·128). Y13 holds onesw, Y10 sixteens
// (Q5_0). Clobbers Y0–Y6.
#define Q41INT(xoff, yoff, DST) \
	Q4CODES(xoff+4(SI))        \
	VMOVDQU    yoff+4(DI), Y2  \
	VPMADDUBSW Y2, Y0, Y3      \
	VPMADDWD   Y13, Y3, DST

#define Q50INT(xoff, yoff, DST) \
	Q4CODES(xoff+6(SI))        \
	Q5HIGH(xoff+2(SI))         \
	VMOVDQU    yoff+2(DI), Y2  \
	VPMADDUBSW Y2, Y0, Y3      \
	VPMADDUBSW Y2, Y10, Y4     \
	VPSUBW     Y4, Y3, Y3      \
	VPMADDWD   Y13, Y3, DST

#define Q51INT(xoff, yoff, DST) \
	Q4CODES(xoff+8(SI))        \
	Q5HIGH(xoff+4(SI))         \
	VMOVDQU    yoff+4(DI), Y2  \
	VPMADDUBSW Y2, Y0, Y3      \
	VPMADDWD   Y13, Y3, DST

// QUAD4 runs INT for four consecutive blocks (XS, YS their weight and
// activation block sizes) and leaves their four sums, in block order, as
// float32 in X8 (the integer sums exact in any order). Clobbers Y0–Y6,
// Y8, Y9, Y14.
#define QUAD4(INT, XS, YS) \
	INT(0, 0, Y8)            \
	INT(XS, YS, Y9)          \
	VPHADDD      Y9, Y8, Y8  \
	INT(2*XS, 2*YS, Y9)      \
	INT(3*XS, 3*YS, Y14)     \
	VPHADDD      Y14, Y9, Y9 \
	VPHADDD      Y9, Y8, Y8  \
	VEXTRACTI128 $1, Y8, X9  \
	VPADDD       X9, X8, X8  \
	VCVTDQ2PS    X8, X8

// ADD4 adds the four float32 of X, in lane order, to sumf (X7) one after
// another: the twins' serial sum over blocks. Clobbers X0.
#define ADD4(X) \
	VADDSS    X, X7, X7  \
	VMOVSHDUP X, X0      \
	VADDSS    X0, X7, X7 \
	VMOVHLPS  X, X, X0   \
	VADDSS    X0, X7, X7 \
	VPSHUFD   $3, X, X0  \
	VADDSS    X0, X7, X7

// Q81SUM4 ends four Q4_1 or Q5_1 blocks (XS bytes apart) against their
// Q8_1 blocks: c = (dx·dy)·sumi + m·s lane by lane (the scalar ops of the
// twin, four at a time: the same roundings), then ADD4(c). The sums are
// in X8. Clobbers AX, BX, X0–X2, X5, X6.
#define Q81SUM4(XS) \
	F16X4(0(SI), XS(SI), 2*XS(SI), 3*XS(SI), AX, X1)    \
	F16X4(0(DI), 36(DI), 72(DI), 108(DI), BX, X2)       \
	VMULPS X2, X1, X1                                   \
	VMULPS X8, X1, X1                                   \
	F16X4(2(SI), 2+XS(SI), 2+2*XS(SI), 2+3*XS(SI), AX, X5) \
	F16X4(2(DI), 38(DI), 74(DI), 110(DI), BX, X6)       \
	VMULPS X6, X5, X5                                   \
	VADDPS X5, X1, X1                                   \
	ADD4(X1)

// Q81SUM ends one Q4_1 or Q5_1 block against its Q8_1 block: sumf (X7) +=
// (dx·dy)·float32(sumi) + m·s, sumi in X3's low int32, the two products
// added first as the twin does. Clobbers AX, BX, X0–X2, X5, X6.
#define Q81SUM \
	VCVTDQ2PS X3, X0     \
	F16((SI), AX, X1)    \
	F16((DI), BX, X2)    \
	VMULSS    X2, X1, X1 \
	VMULSS    X0, X1, X1 \
	F16(2(SI), AX, X5)   \
	F16(2(DI), BX, X6)   \
	VMULSS    X6, X5, X5 \
	VADDSS    X5, X1, X1 \
	VADDSS    X1, X7, X7

// PAIR2 is QUAD4 for two consecutive blocks: their two sums, in block
// order, as float32 in X8's lanes 0 and 1. Clobbers Y0–Y6, Y8, Y9.
#define PAIR2(INT, XS, YS) \
	INT(0, 0, Y8)            \
	INT(XS, YS, Y9)          \
	VPHADDD      Y9, Y8, Y8  \
	VPHADDD      Y8, Y8, Y8  \
	VEXTRACTI128 $1, Y8, X9  \
	VPADDD       X9, X8, X8  \
	VCVTDQ2PS    X8, X8

// F16X2 loads the f16 at addr and o1 into the two low float32 of X (R is
// a scratch GPR).
#define F16X2(addr, o1, R, X) \
	MOVWLZX   addr, R        \
	VMOVD     R, X           \
	VPINSRW   $1, o1, X, X   \
	VCVTPH2PS X, X

// ADD2 adds the two low float32 of X, in lane order, to sumf (X7).
// Clobbers X0.
#define ADD2(X) \
	VADDSS    X, X7, X7  \
	VMOVSHDUP X, X0      \
	VADDSS    X0, X7, X7

// Q81SUM2 is Q81SUM4 for two blocks (their sums in X8's lanes 0 and 1).
#define Q81SUM2(XS) \
	F16X2(0(SI), XS(SI), AX, X1)     \
	F16X2(0(DI), 36(DI), BX, X2)     \
	VMULPS X2, X1, X1                \
	VMULPS X8, X1, X1                \
	F16X2(2(SI), 2+XS(SI), AX, X5)   \
	F16X2(2(DI), 38(DI), BX, X6)     \
	VMULPS X6, X5, X5                \
	VADDPS X5, X1, X1                \
	ADD2(X1)

// Q50SUM4 and Q50SUM2 end four or two Q5_0 blocks against their Q8_0
// blocks (the sums in X8): c = (dx·dy)·sumi lane by lane, then added to
// sumf one block after another. Clobbers AX, BX, X0–X2.
#define Q50SUM4(XS) \
	F16X4(0(SI), XS(SI), 2*XS(SI), 3*XS(SI), AX, X1) \
	F16X4(0(DI), 34(DI), 68(DI), 102(DI), BX, X2)    \
	VMULPS X2, X1, X1                                \
	VMULPS X8, X1, X1                                \
	ADD4(X1)

#define Q50SUM2(XS) \
	F16X2(0(SI), XS(SI), AX, X1) \
	F16X2(0(DI), 34(DI), BX, X2) \
	VMULPS X2, X1, X1            \
	VMULPS X8, X1, X1            \
	ADD2(X1)

// Q50SUM ends one Q5_0 block (its sum in X3's low int32): sumf +=
// (dx·dy)·float32(sumi). Clobbers AX, BX, X0–X2.
#define Q50SUM \
	VCVTDQ2PS  X3, X0     \
	F16((SI), AX, X1)     \
	F16((DI), BX, X2)     \
	VMULSS     X2, X1, X1 \
	VMULSS     X0, X1, X1 \
	VADDSS     X1, X7, X7

// LEGACYROWS is the body of the Q4_1, Q5_0 and Q5_1 row kernels
// (func(x *byte, rb, n int, y *byte, nb int, out *float32)): over n rows
// of rb bytes from x, out[i] = row i's dot with y, nb blocks of XS weight
// and YS activation bytes each: four blocks at a time (QUAD4, then
// SUM4), two (PAIR2, SUM2), then the last one (INT, SUM), every block's
// float term added to sumf in block order as the twin does. The row loop
// is here rather than a call and a Go loop a row: SmolLM's and
// Qwen2-0.5B's rows (576 and 896 values) are 18 and 28 blocks, so a row's
// call, slicing and odd tail cost as much as a fifth of its work. The
// weights are prefetched PF bytes ahead (the Q4_0 and Q8_0 loops' reason).
//
// The caller has loaded x into R13, rb into R11, n into R9, y into R12,
// nb into DX and out into R10 (a macro body names no argument: vet reads
// it as the previous function's).
#define LEGACYROWS(INT, SUM4, SUM2, SUM, XS, YS, ROW, QUAD, PAIR, ONE, END) \
ROW:                    \
	MOVQ   R13, SI         \
	MOVQ   R12, DI         \
	MOVQ   DX, CX          \
	VXORPS X7, X7, X7      \
	CMPQ   CX, $4          \
	JLT    PAIR         \
QUAD:                   \
	PREFETCHT0 PF(SI)      \
	PREFETCHT0 PF+64(SI)   \
	QUAD4(INT, XS, YS)     \
	SUM4(XS)               \
	ADDQ $(4*XS), SI       \
	ADDQ $(4*YS), DI       \
	SUBQ $4, CX            \
	CMPQ CX, $4            \
	JGE  QUAD           \
PAIR:                   \
	CMPQ CX, $2            \
	JLT  ONE            \
	PAIR2(INT, XS, YS)     \
	SUM2(XS)               \
	ADDQ $(2*XS), SI       \
	ADDQ $(2*YS), DI       \
	SUBQ $2, CX            \
ONE:                    \
	TESTQ CX, CX           \
	JZ    END           \
	INT(0, 0, Y3)          \
	HSUM8(Y3, X3, X4)      \
	SUM                    \
END:                    \
	VMOVSS X7, (R10)       \
	ADDQ   $4, R10         \
	ADDQ   R11, R13        \
	DECQ   R9              \
	JNZ    ROW          \
	VZEROUPPER             \
	RET

// func dotRowsQ4_1Q8_1AVX2(x *byte, rb, n int, y *byte, nb int, out *float32)
//
// Per block (Q4_1: d, m, 16 qs bytes; Q8_1: d, s, 32 q8 bytes): sumi =
// Σ q·y with q the raw nibbles; sumf += (dx·dy)·float32(sumi) + m·s, the
// sum of the two products first, as the twin does.
TEXT ·dotRowsQ4_1Q8_1AVX2(SB), NOSPLIT, $0-48
	MOVQ    x+0(FP), R13
	MOVQ    rb+8(FP), R11
	MOVQ    n+16(FP), R9
	MOVQ    y+24(FP), R12
	MOVQ    nb+32(FP), DX
	MOVQ    out+40(FP), R10
	VMOVDQU nib<>(SB), Y15
	VMOVDQU onesw<>(SB), Y13
	LEGACYROWS(Q41INT, Q81SUM4, Q81SUM2, Q81SUM, 20, 36, q41row, q41quad, q41pair, q41one, q41end)

// func dotRowsQ5_0Q8_0AVX2(x *byte, rb, n int, y *byte, nb int, out *float32)
//
// Per block (Q5_0: d, 4 qh bytes, 16 qs bytes): sumi = Σ q·y − 16·Σy
// with q the 5-bit codes 0…31; sumf += (dx·dy)·float32(sumi).
TEXT ·dotRowsQ5_0Q8_0AVX2(SB), NOSPLIT, $0-48
	MOVQ    x+0(FP), R13
	MOVQ    rb+8(FP), R11
	MOVQ    n+16(FP), R9
	MOVQ    y+24(FP), R12
	MOVQ    nb+32(FP), DX
	MOVQ    out+40(FP), R10
	Q5CONSTS
	LEGACYROWS(Q50INT, Q50SUM4, Q50SUM2, Q50SUM, 22, 34, q50row, q50quad, q50pair, q50one, q50end)

// Q5C leaves in Y0 the 32 five-bit codes of the Q5_0 block at SI+xoff,
// byte i element i: the nibbles (Q4CODES) with bit i of qh as 16 (Q5HIGH,
// the all-ones compare operand kept in Y14). Y15 nib, Y12 qhbytes, Y11
// qhbit, Y10 sixteens; clobbers Y1, Y5.
#define Q5C(xoff) \
	VMOVDQU      xoff+6(SI), X0 \
	VPSRLW       $4, X0, X1     \
	VINSERTI128  $1, X1, Y0, Y0 \
	VPAND        Y15, Y0, Y0    \
	VPBROADCASTD xoff+2(SI), Y5 \
	VPSHUFB      Y12, Y5, Y5    \
	VPOR         Y11, Y5, Y5    \
	VPCMPEQB     Y14, Y5, Y5    \
	VPAND        Y10, Y5, Y5    \
	VPOR         Y5, Y0, Y0

// func dotRowsQ5_0Q8_0PAVX2(x *byte, rb, n int, yp *byte, nb int, out *float32)
//
// dotRowsQ5_0Q8_0AVX2 on activations laid out by prepQ5_0Y (yp: per quad
// of blocks their 4·32 quants, then 16·Σy as int32 and dy as float32), the
// same bits. A quad's four blocks are Σ q·y with the raw codes 0…31
// (VPMADDUBSW: pairs of at most 2·31·128 = 7,936 in magnitude), their
// words added pairwise twice within int16 (VPHADDW: sums of eight
// products, at most 31,744), then to int32 (VPMADDWD) per block, less
// the prepared 16·Σy: the exact sumi of each block. Then (dx·dy)·sumi four
// lanes at a time and the four terms added to sumf in block order, as the
// twin does; the last nb mod 4 blocks one by one. Against the unprepared
// kernel this saves each block its offset product and subtraction, the
// activations' scale conversions and three of four int32 reductions.
TEXT ·dotRowsQ5_0Q8_0PAVX2(SB), NOSPLIT, $0-48
	MOVQ    x+0(FP), R13
	MOVQ    rb+8(FP), R11
	MOVQ    n+16(FP), R9
	MOVQ    yp+24(FP), R12
	MOVQ    nb+32(FP), DX
	MOVQ    out+40(FP), R10
	Q5CONSTS
	VPCMPEQB Y14, Y14, Y14

q50prow:
	MOVQ   R13, SI
	MOVQ   R12, R8
	MOVQ   DX, CX
	VXORPS X7, X7, X7
	CMPQ   CX, $4
	JLT    q50ptail

q50pquad:
	PREFETCHT0   PF(SI)
	PREFETCHT0   PF+64(SI)
	Q5C(0)
	VPMADDUBSW   0(R8), Y0, Y2
	Q5C(22)
	VPMADDUBSW   32(R8), Y0, Y3
	VPHADDW      Y3, Y2, Y2
	Q5C(44)
	VPMADDUBSW   64(R8), Y0, Y3
	Q5C(66)
	VPMADDUBSW   96(R8), Y0, Y4
	VPHADDW      Y4, Y3, Y3
	VPHADDW      Y3, Y2, Y2
	VPMADDWD     Y13, Y2, Y2
	VEXTRACTI128 $1, Y2, X3
	VPADDD       X3, X2, X2
	VPSUBD       128(R8), X2, X2
	VCVTDQ2PS    X2, X8
	F16X4(0(SI), 22(SI), 44(SI), 66(SI), AX, X1)
	VMULPS       144(R8), X1, X1 // dx·dy
	VMULPS       X8, X1, X1      // ·sumi
	ADD4(X1)
	ADDQ $88, SI
	ADDQ $160, R8
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  q50pquad

q50ptail:
	TESTQ CX, CX
	JZ    q50pend
	XORQ  DI, DI // 4·j, block j of the last quad

q50pone:
	Q5C(0)
	VPMADDUBSW (R8)(DI*8), Y0, Y2
	VPMADDWD   Y13, Y2, Y2
	HSUM8(Y2, X2, X3)
	VMOVD      128(R8)(DI*1), X3
	VPSUBD     X3, X2, X2
	VCVTDQ2PS  X2, X2
	F16((SI), AX, X1)
	VMULSS     144(R8)(DI*1), X1, X1
	VMULSS     X2, X1, X1
	VADDSS     X1, X7, X7
	ADDQ       $22, SI
	ADDQ       $4, DI
	DECQ       CX
	JNZ        q50pone

q50pend:
	VMOVSS X7, (R10)
	ADDQ   $4, R10
	ADDQ   R11, R13
	DECQ   R9
	JNZ    q50prow
	VZEROUPPER
	RET

// func prepQ5_0YAsm(y, yp *byte, nb int)
//
// prepQ5_0Y's layout for blocks 0…nb−1 of Q8_0 row y: block b's quants at
// yp + 160·(b/4) + 32·(b mod 4), its 16·Σy (int32, exact: VPMADDUBSW of
// 16 with y, pairs of at most 4,096) at +128 + 4·(b mod 4) and dy as
// float32 at +144 + 4·(b mod 4).
TEXT ·prepQ5_0YAsm(SB), NOSPLIT, $0-24
	MOVQ    y+0(FP), DI
	MOVQ    yp+8(FP), SI
	MOVQ    nb+16(FP), CX
	VMOVDQU sixteens<>(SB), Y10
	VMOVDQU onesw<>(SB), Y13
	XORQ    BX, BX // 4·(b mod 4)

q50yblock:
	VMOVDQU    2(DI), Y0
	VMOVDQU    Y0, (SI)(BX*8)
	VPMADDUBSW Y0, Y10, Y1
	VPMADDWD   Y13, Y1, Y1
	HSUM8(Y1, X1, X2)
	VMOVD      X1, 128(SI)(BX*1)
	F16((DI), AX, X3)
	VMOVSS     X3, 144(SI)(BX*1)
	ADDQ       $34, DI
	ADDQ       $4, BX
	CMPQ       BX, $16
	JLT        q50ynext
	XORQ       BX, BX
	ADDQ       $160, SI

q50ynext:
	DECQ CX
	JNZ  q50yblock
	VZEROUPPER
	RET

// ADD4TO is ADD4 into DST: the four float32 of X, in lane order, added to
// DST one after another. Clobbers X0.
#define ADD4TO(X, DST) \
	VADDSS    X, DST, DST  \
	VMOVSHDUP X, X0        \
	VADDSS    X0, DST, DST \
	VMOVHLPS  X, X, X0     \
	VADDSS    X0, DST, DST \
	VPSHUFD   $3, X, X0    \
	VADDSS    X0, DST, DST

// Q5CB is Q5C with the all-ones compare operand made in Y1 (the two-row
// kernel keeps Y14 for a sum). Clobbers Y1, Y5.
#define Q5CB(xoff) \
	VMOVDQU      xoff+6(SI), X0 \
	VPSRLW       $4, X0, X1     \
	VINSERTI128  $1, X1, Y0, Y0 \
	VPAND        Y15, Y0, Y0    \
	VPBROADCASTD xoff+2(SI), Y5 \
	VPSHUFB      Y12, Y5, Y5    \
	VPOR         Y11, Y5, Y5    \
	VPCMPEQB     Y1, Y1, Y1     \
	VPCMPEQB     Y1, Y5, Y5     \
	VPAND        Y10, Y5, Y5    \
	VPOR         Y5, Y0, Y0

// func dotRowsQ5_0Q8_0P2AVX2(x *byte, rb, n int, ypa, ypb *byte, nb int, outA, outB *float32)
//
// dotRowsQ5_0Q8_0PAVX2 against two prepared activation rows (ypa, ypb) at
// once, each weight block's codes unpacked and its scale converted once
// for both (a prompt's product: every weight row meets every activation
// row): outA[i] and outB[i] are row i's two dots, each with its own
// integer sums, float terms and order, the one-row kernel's bits.
TEXT ·dotRowsQ5_0Q8_0P2AVX2(SB), NOSPLIT, $16-64
	MOVQ     x+0(FP), R13
	MOVQ     rb+8(FP), R11
	MOVQ     n+16(FP), R9
	MOVQ     nb+40(FP), DX
	MOVQ     outA+48(FP), R10
	MOVQ     outB+56(FP), AX
	MOVQ     AX, outb-8(SP)
	Q5CONSTS

q50p2row:
	MOVQ   R13, SI
	MOVQ   ypa+24(FP), R8
	MOVQ   ypb+32(FP), BX
	MOVQ   DX, CX
	VXORPS X7, X7, X7   // row A's sumf
	VXORPS X14, X14, X14 // row B's
	CMPQ   CX, $4
	JLT    q50p2tail

q50p2quad:
	PREFETCHT0   PF(SI)
	PREFETCHT0   PF+64(SI)
	Q5CB(0)
	VPMADDUBSW   0(R8), Y0, Y2
	VPMADDUBSW   0(BX), Y0, Y6
	Q5CB(22)
	VPMADDUBSW   32(R8), Y0, Y3
	VPMADDUBSW   32(BX), Y0, Y8
	VPHADDW      Y3, Y2, Y2
	VPHADDW      Y8, Y6, Y6
	Q5CB(44)
	VPMADDUBSW   64(R8), Y0, Y3
	VPMADDUBSW   64(BX), Y0, Y8
	Q5CB(66)
	VPMADDUBSW   96(R8), Y0, Y4
	VPMADDUBSW   96(BX), Y0, Y9
	VPHADDW      Y4, Y3, Y3
	VPHADDW      Y9, Y8, Y8
	VPHADDW      Y3, Y2, Y2
	VPHADDW      Y8, Y6, Y6
	VPMADDWD     Y13, Y2, Y2
	VPMADDWD     Y13, Y6, Y6
	VEXTRACTI128 $1, Y2, X3
	VEXTRACTI128 $1, Y6, X8
	VPADDD       X3, X2, X2
	VPADDD       X8, X6, X6
	VPSUBD       128(R8), X2, X2
	VPSUBD       128(BX), X6, X6
	VCVTDQ2PS    X2, X2
	VCVTDQ2PS    X6, X6
	F16X4(0(SI), 22(SI), 44(SI), 66(SI), AX, X1)
	VMULPS       144(R8), X1, X3 // dx·dy, row A
	VMULPS       144(BX), X1, X4 // row B
	VMULPS       X2, X3, X3      // ·sumi
	VMULPS       X6, X4, X4
	ADD4TO(X3, X7)
	ADD4TO(X4, X14)
	ADDQ $88, SI
	ADDQ $160, R8
	ADDQ $160, BX
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  q50p2quad

q50p2tail:
	TESTQ CX, CX
	JZ    q50p2end
	XORQ  DI, DI // 4·j, block j of the last quad

q50p2one:
	Q5CB(0)
	VPMADDUBSW (R8)(DI*8), Y0, Y2
	VPMADDUBSW (BX)(DI*8), Y0, Y6
	VPMADDWD   Y13, Y2, Y2
	VPMADDWD   Y13, Y6, Y6
	HSUM8(Y2, X2, X3)
	HSUM8(Y6, X6, X3)
	VMOVD      128(R8)(DI*1), X3
	VPSUBD     X3, X2, X2
	VMOVD      128(BX)(DI*1), X3
	VPSUBD     X3, X6, X6
	VCVTDQ2PS  X2, X2
	VCVTDQ2PS  X6, X6
	F16((SI), AX, X1)
	VMULSS     144(R8)(DI*1), X1, X3
	VMULSS     144(BX)(DI*1), X1, X4
	VMULSS     X2, X3, X3
	VMULSS     X6, X4, X4
	VADDSS     X3, X7, X7
	VADDSS     X4, X14, X14
	ADDQ       $22, SI
	ADDQ       $4, DI
	DECQ       CX
	JNZ        q50p2one

q50p2end:
	VMOVSS X7, (R10)
	ADDQ   $4, R10
	MOVQ   outb-8(SP), AX
	VMOVSS X14, (AX)
	ADDQ   $4, AX
	MOVQ   AX, outb-8(SP)
	ADDQ   R11, R13
	DECQ   R9
	JNZ    q50p2row
	VZEROUPPER
	RET

// Q80P sums the products of Q8_0 block SI+xoff with the prepared quants
// at R8+yoff into the eight int32 lanes of DST (exact: sign-extended to
// int16, VPMADDWD pairs of at most 2·128·128). Clobbers Y0–Y3.
#define Q80P(xoff, yoff, DST) \
	VPMOVSXBW xoff+2(SI), Y0   \
	VPMOVSXBW xoff+18(SI), Y1  \
	VPMOVSXBW yoff(R8), Y2     \
	VPMOVSXBW yoff+16(R8), Y3  \
	VPMADDWD  Y2, Y0, Y0       \
	VPMADDWD  Y3, Y1, Y1       \
	VPADDD    Y1, Y0, DST

// func dotRowsQ8_0Q8_0PAVX2(x *byte, rb, n int, yp *byte, nb int, out *float32)
//
// dotRowsQ8_0Q8_0AVX2 on activations laid out by prepQ8_0Y (yp: per quad
// of blocks their 4·32 quants, then dy as float32), the same bits: a
// quad's four integer sums side by side (VPHADDD), sumi·(dx·dy) four lanes
// at a time (dx·dy rounded first, as the twin does), the four terms added
// to sumf in block order; the last nb mod 4 blocks one by one.
TEXT ·dotRowsQ8_0Q8_0PAVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), R13
	MOVQ rb+8(FP), R11
	MOVQ n+16(FP), R9
	MOVQ yp+24(FP), R12
	MOVQ nb+32(FP), DX
	MOVQ out+40(FP), R10

q80prow:
	MOVQ   R13, SI
	MOVQ   R12, R8
	MOVQ   DX, CX
	VXORPS X7, X7, X7
	CMPQ   CX, $4
	JLT    q80ptail

q80pquad:
	PREFETCHT0   PF(SI)
	PREFETCHT0   PF+64(SI)
	Q80P(0, 0, Y8)
	Q80P(34, 32, Y9)
	VPHADDD      Y9, Y8, Y8
	Q80P(68, 64, Y9)
	Q80P(102, 96, Y4)
	VPHADDD      Y4, Y9, Y9
	VPHADDD      Y9, Y8, Y8
	VEXTRACTI128 $1, Y8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8
	F16X4(0(SI), 34(SI), 68(SI), 102(SI), AX, X1)
	VMULPS       128(R8), X1, X1 // dx·dy
	VMULPS       X8, X1, X1      // ·sumi
	ADD4(X1)
	ADDQ $136, SI
	ADDQ $144, R8
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  q80pquad

q80ptail:
	TESTQ CX, CX
	JZ    q80pend
	XORQ  DI, DI // 4·j, block j of the last quad

q80pone:
	VPMOVSXBW 2(SI), Y0
	VPMOVSXBW 18(SI), Y1
	VPMOVSXBW (R8)(DI*8), Y2
	VPMOVSXBW 16(R8)(DI*8), Y3
	VPMADDWD  Y2, Y0, Y0
	VPMADDWD  Y3, Y1, Y1
	VPADDD    Y1, Y0, Y0
	HSUM8(Y0, X0, X1)
	VCVTDQ2PS X0, X0
	F16((SI), AX, X1)
	VMULSS    128(R8)(DI*1), X1, X1
	VMULSS    X1, X0, X0
	VADDSS    X0, X7, X7
	ADDQ      $34, SI
	ADDQ      $4, DI
	DECQ      CX
	JNZ       q80pone

q80pend:
	VMOVSS X7, (R10)
	ADDQ   $4, R10
	ADDQ   R11, R13
	DECQ   R9
	JNZ    q80prow
	VZEROUPPER
	RET

// func dotRowsQ5_1Q8_1AVX2(x *byte, rb, n int, y *byte, nb int, out *float32)
//
// Per block (Q5_1: d, m, 4 qh bytes, 16 qs bytes): sumi = Σ q·y with q
// the 5-bit codes; sumf += (dx·dy)·float32(sumi) + m·s, as Q4_1.
TEXT ·dotRowsQ5_1Q8_1AVX2(SB), NOSPLIT, $0-48
	MOVQ    x+0(FP), R13
	MOVQ    rb+8(FP), R11
	MOVQ    n+16(FP), R9
	MOVQ    y+24(FP), R12
	MOVQ    nb+32(FP), DX
	MOVQ    out+40(FP), R10
	Q5CONSTS
	LEGACYROWS(Q51INT, Q81SUM4, Q81SUM2, Q81SUM, 24, 36, q51row, q51quad, q51pair, q51one, q51end)

// Q40INT2 is Q40INT for block xoff of both weight rows, SI's lanes into
// D0 and R8's into D1, against the Q8_0 block DI+yoff: the activations
// and their offset term 8·Σy are loaded and computed once for the two.
// Clobbers Y0–Y4.
#define Q40INT2(xoff, yoff, D0, D1) \
	Q40Y(yoff)          \
	Q40ROW(SI, xoff, D0) \
	Q40ROW(R8, xoff, D1)

// Q40FLOAT2 ends a quad of both rows, their four float32(sumi) each in X5
// (row 0) and X12 (row 1): ·dx (DX0, DX1), ·dy (DY), four at a time (the
// same roundings lane by lane), then added to the rows' sums (X7, X6) one
// block after another, as the twin does. Clobbers X0, X1.
#define Q40FLOAT2(DX0, DX1, DY) \
	VMULPS    DX0, X5, X5   \
	VMULPS    DX1, X12, X12 \
	VMULPS    DY, X5, X5    \
	VMULPS    DY, X12, X12  \
	VADDSS    X5, X7, X7    \
	VADDSS    X12, X6, X6   \
	VMOVSHDUP X5, X0        \
	VMOVSHDUP X12, X1       \
	VADDSS    X0, X7, X7    \
	VADDSS    X1, X6, X6    \
	VMOVHLPS  X5, X5, X0    \
	VMOVHLPS  X12, X12, X1  \
	VADDSS    X0, X7, X7    \
	VADDSS    X1, X6, X6    \
	VPSHUFD   $3, X5, X0    \
	VPSHUFD   $3, X12, X1   \
	VADDSS    X0, X7, X7    \
	VADDSS    X1, X6, X6

// Q40STEP2 is one block of both rows (SI, R8) against DI's, added to their
// sums (X7, X6), and the pointers advanced: the two-row kernels' tail.
// Y13–Y15 hold onesw, eights and the nibble mask. Clobbers AX, BX, Y0–Y5,
// X12.
#define Q40STEP2 \
	Q40INT(SI, 0, 0, Y3)    \
	HSUM8(Y3, X3, X4)       \
	VCVTDQ2PS X3, X5        \
	Q40INT(R8, 0, 0, Y3)    \
	HSUM8(Y3, X3, X4)       \
	VCVTDQ2PS X3, X12       \
	F16((SI), AX, X1)       \
	F16((R8), AX, X3)       \
	F16((DI), BX, X2)       \
	VMULSS    X1, X5, X5    \
	VMULSS    X3, X12, X12  \
	VMULSS    X2, X5, X5    \
	VMULSS    X2, X12, X12  \
	VADDSS    X5, X7, X7    \
	VADDSS    X12, X6, X6   \
	ADDQ      $18, SI       \
	ADDQ      $18, R8       \
	ADDQ      $34, DI

// func dotQ4_0Q8_0x2AVX2(x0, x1, y *byte, nb int, out *[2]float32)
//
// dotQ4_0Q8_0AVX2 for two weight rows against one activation row, each
// row's sum in its own order (out[0] for x0, out[1] for x1, bit for bit
// the single-row results): the two chains of dependent additions overlap,
// and the activations' scales are converted once for both, their bytes
// loaded and their offset term 8·Σy computed once (Q40INT2: in cache 3–11%
// faster than a quad of Q40INT a row, A/B in four pairs on the CI machine;
// W13 on 2 cores 3.12 against 3.30 ms, the medians of 16 runs each,
// alternating). A four-row form
// (each row's four blocks in turn, four chains, four streams prefetched)
// was slower, A/B on the CI machine: 8.4 against 9.5 GB/s in cache, W13
// 10.4–12.0 against 13.5–14.1 GB/s.
TEXT ·dotQ4_0Q8_0x2AVX2(SB), NOSPLIT, $0-40
	MOVQ    x0+0(FP), SI
	MOVQ    x1+8(FP), R8
	MOVQ    y+16(FP), DI
	MOVQ    nb+24(FP), CX
	VMOVDQU nib<>(SB), Y15
	VMOVDQU eights<>(SB), Y14
	VMOVDQU onesw<>(SB), Y13
	VXORPS  X7, X7, X7
	VXORPS  X6, X6, X6
	CMPQ    CX, $4
	JLT     q42tail

q42quad:
	PREFETCHT0   PF(SI)
	PREFETCHT0   PF+64(SI)
	PREFETCHT0   PF(R8)
	PREFETCHT0   PF+64(R8)
	Q40INT2(0, 0, Y8, Y5)
	Q40INT2(18, 34, Y9, Y12)
	VPHADDD      Y9, Y8, Y8     // row 0: a01 a23 b01 b23 | a45 a67 b45 b67
	VPHADDD      Y12, Y5, Y5    // row 1
	Q40INT2(36, 68, Y9, Y12)
	Q40INT2(54, 102, Y10, Y11)
	VPHADDD      Y10, Y9, Y9    // row 0: c… d…
	VPHADDD      Y11, Y12, Y12  // row 1
	VPHADDD      Y9, Y8, Y8     // row 0: a0123 b0123 c0123 d0123 | a4567 …
	VPHADDD      Y12, Y5, Y5    // row 1
	VEXTRACTI128 $1, Y5, X9
	VPADDD       X9, X5, X5     // row 1's four sumi
	VCVTDQ2PS    X5, X12
	VEXTRACTI128 $1, Y8, X9
	VPADDD       X9, X8, X8     // row 0's
	VCVTDQ2PS    X8, X5
	F16X4(0(SI), 18(SI), 36(SI), 54(SI), AX, X1)
	F16X4(0(R8), 18(R8), 36(R8), 54(R8), AX, X3)
	F16X4(0(DI), 34(DI), 68(DI), 102(DI), BX, X2)
	Q40FLOAT2(X1, X3, X2)
	ADDQ      $72, SI
	ADDQ      $72, R8
	ADDQ      $136, DI
	SUBQ      $4, CX
	CMPQ      CX, $4
	JGE       q42quad

q42tail:
	TESTQ CX, CX
	JZ    q42done

q42loop:
	Q40STEP2
	DECQ      CX
	JNZ       q42loop

q42done:
	MOVQ   out+32(FP), AX
	VMOVSS X7, (AX)
	VMOVSS X6, 4(AX)
	VZEROUPPER
	RET

// Q40P2INT computes the int32 lanes of Q4_0 blocks X+xoff and X+xoff+18
// against their prepared activations at R12+ypoff (prepQ4_0Y2: the two
// blocks' low-nibble quants side by side, then their high-nibble ones)
// into DST: lanes 0–3 the first block's Σ q·y in four partial sums, lanes
// 4–7 the second's (the raw nibbles q, without the −8: Q40P2SUM takes
// 8·Σy off). One 256-bit pass for two blocks' nibbles, where Q40ROW takes
// one for each. Clobbers Y0, Y1.
#define Q40P2INT(X, xoff, ypoff, DST) \
	VMOVDQU     xoff+2(X), X0          \
	VINSERTI128 $1, xoff+20(X), Y0, Y0 \
	VPSRLW      $4, Y0, Y1             \
	VPAND       Y15, Y0, Y0            \
	VPAND       Y15, Y1, Y1            \
	VPMADDUBSW  ypoff(R12), Y0, Y0     \
	VPMADDUBSW  ypoff+32(R12), Y1, Y1  \
	VPADDW      Y1, Y0, Y0             \
	VPMADDWD    Y13, Y0, DST

// Q40P2SUM reduces a quad's lanes A (blocks 0, 1) and B (blocks 2, 3), as
// Q40P2INT leaves them, to the four blocks' sumi in block order, takes off
// their 8·Σy (R12+128) and converts them to float32 into OUT. XA and XB
// are A's and B's low halves. Clobbers A, B.
#define Q40P2SUM(A, B, XA, XB, OUT) \
	VPHADDD      B, A, A      \
	VPHADDD      A, A, A      \
	VEXTRACTI128 $1, A, XB    \
	VPUNPCKLDQ   XB, XA, XA   \
	VPSUBD       128(R12), XA, XA \
	VCVTDQ2PS    XA, OUT

// Q40FLOAT2T is Q40FLOAT2 with the two rows' sums side by side in X7
// (row 0 in lane 0, row 1 in lane 1): the two rows' products of each
// block paired in one vector (an unpack), so that each block's addition
// is one VADDPS for both rows, the twin's additions in block order lane by
// lane (lanes 2 and 3 add what they add, unread). Clobbers X0, X1.
#define Q40FLOAT2T(DX0, DX1, DY) \
	VMULPS    DX0, X5, X5   \
	VMULPS    DX1, X12, X12 \
	VMULPS    DY, X5, X5    \
	VMULPS    DY, X12, X12  \
	VUNPCKLPS X12, X5, X0   \
	VUNPCKHPS X12, X5, X1   \
	VADDPS    X0, X7, X7    \
	VMOVHLPS  X0, X0, X0    \
	VADDPS    X0, X7, X7    \
	VADDPS    X1, X7, X7    \
	VMOVHLPS  X1, X1, X1    \
	VADDPS    X1, X7, X7

// func dotRowsQ4_0Q8_0x2PAVX2(x *byte, rb, n int, y, yp *byte, nb int, out *float32)
//
// dotQ4_0Q8_0x2AVX2 over n pairs of weight rows (rows 2p and 2p+1 from x,
// rb bytes apart; their sums in out[2p] and out[2p+1]) with the
// activations prepared once a row (prepQ4_0Y2, yp: per quad of blocks the
// low- and high-nibble quants of each pair of blocks side by side, the
// blocks' 8·Σy and their scales as float32): a pair of weight blocks'
// nibbles is one 256-bit load, split and multiplied once (Q40P2INT), the
// 8·Σy are not computed again for every pair of weight rows, and the row
// loop is here rather than a call a pair. The float operations are the
// twin's, block by block in order, as dotQ4_0Q8_0x2AVX2 does them: each
// row's bits are the single-row kernel's. The blocks past the last whole
// quad take Q40STEP2 on the raw activations y.
TEXT ·dotRowsQ4_0Q8_0x2PAVX2(SB), NOSPLIT, $16-56
	MOVQ    x+0(FP), R13
	MOVQ    n+16(FP), AX
	MOVQ    AX, cnt-8(SP)
	MOVQ    out+48(FP), AX
	MOVQ    AX, outp-16(SP)
	VMOVDQU nib<>(SB), Y15
	VMOVDQU eights<>(SB), Y14
	VMOVDQU onesw<>(SB), Y13

q4r2pair:
	MOVQ   R13, SI
	MOVQ   R13, R8
	ADDQ   rb+8(FP), R8
	MOVQ   y+24(FP), DI
	MOVQ   yp+32(FP), R12
	MOVQ   nb+40(FP), CX
	VXORPS X7, X7, X7
	VXORPS X6, X6, X6
	CMPQ   CX, $4
	JLT    q4r2tail

q4r2quad:
	PREFETCHT0 PF(SI)
	PREFETCHT0 PF+64(SI)
	PREFETCHT0 PF(R8)
	PREFETCHT0 PF+64(R8)
	Q40P2INT(SI, 0, 0, Y8)
	Q40P2INT(SI, 36, 64, Y9)
	Q40P2INT(R8, 0, 0, Y10)
	Q40P2INT(R8, 36, 64, Y11)
	Q40P2SUM(Y8, Y9, X8, X9, X5)
	Q40P2SUM(Y10, Y11, X10, X11, X12)
	F16X4(0(SI), 18(SI), 36(SI), 54(SI), AX, X1)
	F16X4(0(R8), 18(R8), 36(R8), 54(R8), AX, X3)
	VMOVUPS 144(R12), X2
	Q40FLOAT2T(X1, X3, X2)
	ADDQ    $72, SI
	ADDQ    $72, R8
	ADDQ    $136, DI
	ADDQ    $160, R12
	SUBQ    $4, CX
	CMPQ    CX, $4
	JGE     q4r2quad

q4r2tail:
	VMOVSHDUP X7, X6 // row 1's sum to X6 for Q40STEP2 (row 0's stays in X7)
	TESTQ CX, CX
	JZ    q4r2done

q4r2loop:
	Q40STEP2
	DECQ CX
	JNZ  q4r2loop

q4r2done:
	MOVQ   outp-16(SP), AX
	VMOVSS X7, (AX)
	VMOVSS X6, 4(AX)
	ADDQ   $8, AX
	MOVQ   AX, outp-16(SP)
	MOVQ   rb+8(FP), AX
	LEAQ   (R13)(AX*2), R13
	DECQ   cnt-8(SP)
	JNZ    q4r2pair
	VZEROUPPER
	RET

// LANES32 adds to the int32 lanes Y9 the contributions of 32 elements: Q
// holds their unsigned codes in element order, yaddr their 32 q8 bytes,
// scaddr the dword (scale_a, scale_b) of int16. Clobbers Q, Y5, Y6.
#define LANES32(Q, yaddr, scaddr) \
	VPERMD       Q, Y14, Q    \
	VPSHUFB      Y13, Q, Q    \
	VPERMD       yaddr, Y14, Y5 \
	VPSHUFB      Y13, Y5, Y5  \
	VPMADDUBSW   Y5, Q, Q     \
	VPBROADCASTD scaddr, Y6   \
	VPMADDWD     Y6, Q, Q     \
	VPADDD       Q, Y9, Y9

// LANES32OFF is LANES32 for codes stored with an offset: it subtracts
// Y11 (the offset in every byte) times the q8 bytes before scaling.
#define LANES32OFF(Q, yaddr, scaddr) \
	VPERMD       Q, Y14, Q    \
	VPSHUFB      Y13, Q, Q    \
	VPERMD       yaddr, Y14, Y5 \
	VPSHUFB      Y13, Y5, Y5  \
	VPMADDUBSW   Y5, Q, Q     \
	VPMADDUBSW   Y5, Y11, Y5  \
	VPSUBW       Y5, Q, Q     \
	VPBROADCASTD scaddr, Y6   \
	VPMADDWD     Y6, Q, Q     \
	VPADDD       Q, Y9, Y9

// K45SCALES and K45HEAD do what Q4_K and Q5_K blocks share before their
// codes (K45SCALES leaves the doubled minimums in Y1): the
// scales and mins unpacked from the 12 bytes at 4(SI) as get_scale_min_k4
// does (scales into R8, mins into R10, 8 bytes each); the scale words
// doubled, [s0 s0 s1 s1 … s7 s7], to the scratch; and sumi = Σ
// bsums[j]·m[j/2] (the int16 bsums against [m0 m0 … m7 m7]) as float32
// in X8. Clobbers AX, BX, DX, R8–R11, X0–X2.
#define K45SCALES \
	MOVL 4(SI), AX \
	MOVL 8(SI), BX \
	MOVL 12(SI), DX \
	MOVL AX, R8 \
	ANDL $0x3f3f3f3f, R8 \
	MOVL AX, R9 \
	SHRL $6, R9 \
	ANDL $0x03030303, R9 \
	SHLL $4, R9 \
	MOVL DX, R11 \
	ANDL $0x0f0f0f0f, R11 \
	ORL  R11, R9 \
	SHLQ $32, R9 \
	ORQ  R9, R8 \
	MOVL BX, R10 \
	ANDL $0x3f3f3f3f, R10 \
	MOVL BX, R11 \
	SHRL $6, R11 \
	ANDL $0x03030303, R11 \
	SHLL $4, R11 \
	SHRL $4, DX \
	ANDL $0x0f0f0f0f, DX \
	ORL  DX, R11 \
	SHLQ $32, R11 \
	ORQ  R11, R10 \
	VMOVQ       R8, X0 \
	VPMOVZXBW   X0, X0 \
	VPUNPCKLWD  X0, X0, X1 \
	VPUNPCKHWD  X0, X0, X2 \
	VINSERTI128 $1, X2, Y1, Y1 \
	VMOVDQU     Y1, scr-32(SP) \
	VMOVQ       R10, X0 \
	VPMOVZXBW   X0, X0 \
	VPUNPCKLWD  X0, X0, X1 \
	VPUNPCKHWD  X0, X0, X2 \
	VINSERTI128 $1, X2, Y1, Y1

// K45HEAD is K45SCALES and row DI's minimums' sum in X8.
#define K45HEAD \
	K45SCALES \
	VPMADDWD    260(DI), Y1, Y1 \
	HSUM8(Y1, X1, X2) \
	VCVTDQ2PS   X1, X8

// K45HEAD2 is K45HEAD for two activation rows: row DI's minimums' sum in
// X8, row R13's in X3 (as float32). Clobbers Y3 too.
#define K45HEAD2 \
	K45SCALES \
	VPMADDWD    260(R13), Y1, Y3 \
	VPMADDWD    260(DI), Y1, Y1 \
	HSUM8(Y1, X1, X2) \
	VCVTDQ2PS   X1, X8 \
	HSUM8(Y3, X3, X2) \
	VCVTDQ2PS   X3, X3

// K45TAIL ends a Q4_K or Q5_K block: sums[l] += d·float32(aux[l]) (Y10 +=
// from the int32 lanes Y9, d = dx·dy) and sumf −= dmin·sumi (X7, with
// dmin = dxmin·dy and float32(sumi) in X8), the twin's roundings in its
// order. Clobbers AX, X1–X3, Y9.
#define K45TAILR(YADDR, ACC, SUMS, SUMI, SUMF) \
	VMOVSS       YADDR, X3 \
	F16((SI), AX, X1)         \
	VMULSS       X3, X1, X1   \
	VBROADCASTSS X1, Y1       \
	VCVTDQ2PS    ACC, ACC       \
	VMULPS       Y1, ACC, ACC   \
	VADDPS       ACC, SUMS, SUMS \
	F16(2(SI), AX, X2)        \
	VMULSS       X3, X2, X2   \
	VMULSS       SUMI, X2, X2   \
	VSUBSS       X2, SUMF, SUMF

// K45TAIL is K45TAILR for row DI in the one-row kernels' registers.
#define K45TAIL K45TAILR((DI), Y9, Y10, X8, X7)

// Q4K64 does the 64 elements of Q4_K chunk j (qs bytes 32j…32j+31: low
// nibbles are elements 64j…64j+31 with scale 2j, high nibbles the next 32
// with scale 2j+1). The scale dwords (s, s) are at scr-32(SP)+4k.
#define Q4K64(qoff, yoff, sc1, sc2) \
	VMOVDQU qoff(SI), Y0  \
	VPSRLW  $4, Y0, Y1    \
	VPAND   Y15, Y0, Y0   \
	VPAND   Y15, Y1, Y1   \
	LANES32(Y0, yoff(DI), sc1) \
	LANES32(Y1, yoff+32(DI), sc2)

// func dotQ4_KQ8_KAVX2(x, y *byte, nb int, sums *[8]float32) float32
//
// Tried and taken back (session 35, this 2-core Zen 4 VM): the codes'
// products on AVX-512 VNNI, a 64-element chunk as one ZMM of codes and one
// of q8 bytes permuted (VPERMB) so that each dword holds one lane's four
// elements, one VPDPBUSD and one VPMULLD by the scales, 10 instructions
// for 64 elements against LANES32's 16, with K45HEAD and K45TAIL kept:
// the same bits, and the same time (BenchmarkVecDot q4_k, 4,096 weights
// in cache, five rounds alternating: 196–228 ns against 200–214): 512-bit
// permutes and multiplies are two passes each on Zen 4, and the scales'
// unpacking and the block's float tail stay as they are.
//
// Per block: the scales and mins unpacked as get_scale_min_k4 does; sumi =
// Σ bsums[j]·min[j/2]; aux lanes as above; sums[l] += d·float32(aux[l])
// (d = dx·dy); sumf −= dmin·float32(sumi). Returns sumf; the caller adds
// the lanes sums[0…7] to it, as the twin does at the end.
TEXT ·dotQ4_KQ8_KAVX2(SB), NOSPLIT, $32-36
	MOVQ    x+0(FP), SI
	MOVQ    y+8(FP), DI
	MOVQ    nb+16(FP), CX
	VMOVDQU nib<>(SB), Y15
	VMOVDQU permidx<>(SB), Y14
	VMOVDQU lanemask<>(SB), Y13
	VXORPS  Y10, Y10, Y10 // sums
	VXORPS  X7, X7, X7    // sumf

q4kloop:
	K45HEAD

	VPXOR Y9, Y9, Y9
	Q4K64(16, 4, scr-32(SP), scr-28(SP))
	Q4K64(48, 68, scr-24(SP), scr-20(SP))
	Q4K64(80, 132, scr-16(SP), scr-12(SP))
	Q4K64(112, 196, scr-8(SP), scr-4(SP))

	K45TAIL

	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q4kloop

	MOVQ       sums+24(FP), AX
	VMOVUPS    Y10, (AX)
	VMOVSS     X7, ret+32(FP)
	VZEROUPPER
	RET

// Q4K64P is Q4K64 with the q8 bytes prepared (prepQ4_KY: each 32 in the
// order LANES32 puts the codes in, at R12+ypoff) and the 32 code bytes
// permuted once, before their nibbles are split: a byte's low and high
// nibble are elements l and 32+l of the chunk, the same lane l&7, so one
// permutation serves both. Two shuffles for 64 elements where Q4K64 takes
// eight, and four instructions fewer: BenchmarkVecDotRows q4_k (64 rows
// of 4,096 weights, in cache; 2-core Zen 4 VM, six rounds alternating
// with the one-row kernel a row) 9.6–12.0 µs, median 10.9, against
// 11.0–14.3, median 12.0. A block is still ~130 instructions, ~60 of them
// the scales' unpacking, the minimums' sum and the float tail. The same
// form for Q5_K (its qh bytes permuted once a block too) measured no
// faster (12.1–15.8 µs, median 14.5, against 12.2–13.6, median 13.2) and
// was not kept.
#define Q4K64P(qoff, ypoff, sc1, sc2) \
	VMOVDQU      qoff(SI), Y0   \
	VPERMD       Y0, Y14, Y0    \
	VPSHUFB      Y13, Y0, Y0    \
	VPSRLW       $4, Y0, Y1     \
	VPAND        Y15, Y0, Y0    \
	VPAND        Y15, Y1, Y1    \
	VPMADDUBSW   ypoff(R12), Y0, Y0 \
	VPBROADCASTD sc1, Y6        \
	VPMADDWD     Y6, Y0, Y0     \
	VPADDD       Y0, Y9, Y9     \
	VPMADDUBSW   ypoff+32(R12), Y1, Y1 \
	VPBROADCASTD sc2, Y6        \
	VPMADDWD     Y6, Y1, Y1     \
	VPADDD       Y1, Y9, Y9

// func prepQ4_KYAsm(y, yp *byte, nb int)
//
// prepQ4_KY's layout: each 32 quants of each Q8_K block of y permuted as
// LANES32 permutes codes, 256 bytes a block into yp.
TEXT ·prepQ4_KYAsm(SB), NOSPLIT, $0-24
	MOVQ    y+0(FP), DI
	MOVQ    yp+8(FP), SI
	MOVQ    nb+16(FP), CX
	VMOVDQU permidx<>(SB), Y14
	VMOVDQU lanemask<>(SB), Y13

q4kyblock:
	MOVQ $0, AX

q4kygroup:
	VMOVDQU 4(DI)(AX*1), Y0
	VPERMD  Y0, Y14, Y0
	VPSHUFB Y13, Y0, Y0
	VMOVDQU Y0, (SI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, $256
	JLT     q4kygroup

	ADDQ $292, DI
	ADDQ $256, SI
	DECQ CX
	JNZ  q4kyblock

	VZEROUPPER
	RET

// ADDLANES adds the eight float32 lanes of SUMS (XSUMS its low half) to
// DST one by one in lane order, as the Go loops over a [8]float32 did.
// Clobbers X1, X2.
#define ADDLANES(SUMS, XSUMS, DST) \
	VADDSS       XSUMS, DST, DST \
	VPSHUFD      $0x55, XSUMS, X1 \
	VADDSS       X1, DST, DST \
	VPSHUFD      $0xAA, XSUMS, X1 \
	VADDSS       X1, DST, DST \
	VPSHUFD      $0xFF, XSUMS, X1 \
	VADDSS       X1, DST, DST \
	VEXTRACTF128 $1, SUMS, X2 \
	VADDSS       X2, DST, DST \
	VPSHUFD      $0x55, X2, X1 \
	VADDSS       X1, DST, DST \
	VPSHUFD      $0xAA, X2, X1 \
	VADDSS       X1, DST, DST \
	VPSHUFD      $0xFF, X2, X1 \
	VADDSS       X1, DST, DST

// func dotRowsQ4_KQ8_KAVX2P(x *byte, rb, n int, y, yp *byte, nb int, out *float32)
//
// dotQ4_KQ8_KAVX2 over n rows of rb bytes from x, with y's quants
// prepared once for all of them (yp, 256 bytes a block: prepQ4_KY): the
// same lanes, integers, float operations and bits, out[i] = row i's
// minimums' sum plus its eight lanes added one by one in lane order, as
// minLanesAsm adds them. The row loop is here rather than a call and a Go
// loop a row (a 2,048-weight row is 8 blocks, ~180 cycles of products,
// against which those cost ~8%, BenchmarkVecDotRows).
TEXT ·dotRowsQ4_KQ8_KAVX2P(SB), NOSPLIT, $48-56
	MOVQ    x+0(FP), R13
	MOVQ    n+16(FP), AX
	MOVQ    AX, cnt-40(SP)
	MOVQ    out+48(FP), AX
	MOVQ    AX, outp-48(SP)
	VMOVDQU nib<>(SB), Y15
	VMOVDQU permidx<>(SB), Y14
	VMOVDQU lanemask<>(SB), Y13

q4krrow:
	MOVQ   R13, SI
	MOVQ   y+24(FP), DI
	MOVQ   yp+32(FP), R12
	MOVQ   nb+40(FP), CX
	VXORPS Y10, Y10, Y10 // sums
	VXORPS X7, X7, X7    // sumf

q4krloop:
	K45HEAD

	VPXOR Y9, Y9, Y9
	Q4K64P(16, 0, scr-32(SP), scr-28(SP))
	Q4K64P(48, 64, scr-24(SP), scr-20(SP))
	Q4K64P(80, 128, scr-16(SP), scr-12(SP))
	Q4K64P(112, 192, scr-8(SP), scr-4(SP))

	K45TAIL

	ADDQ $144, SI
	ADDQ $292, DI
	ADDQ $256, R12
	DECQ CX
	JNZ  q4krloop

	// sumf + sums[0] + sums[1] + … + sums[7], in that order.
	ADDLANES(Y10, X10, X7)
	ROWSTORE(X7, outp-48(SP))
	ROWNEXT(R13, q4krrow)

	VZEROUPPER
	RET

// Q5K64 does the 64 elements of Q5_K chunk j: Q4K64's nibbles with each
// code's fifth bit from qh (Y12, the block's 32 qh bytes; byte l holds
// bit 2j of element 64j+l and bit 2j+1 of element 64j+32+l). SLO n and
// SHI m shift the qh words so that bit 2j (2j+1) of every byte lands on
// bit 4, which Y11 (0x10 in every byte) keeps: a left shift by at most 4,
// or a right shift, moves no bit from one byte into bit 4 of the other.
// Codes are then 0…31: a VPMADDUBSW pair is at most 2·31·128 = 7936,
// exact in int16.
#define Q5K64(qoff, yoff, sc1, sc2, SLO, n, SHI, m) \
	VMOVDQU qoff(SI), Y0  \
	VPSRLW  $4, Y0, Y1    \
	VPAND   Y15, Y0, Y0   \
	VPAND   Y15, Y1, Y1   \
	SLO     $n, Y12, Y3   \
	VPAND   Y11, Y3, Y3   \
	VPOR    Y3, Y0, Y0    \
	SHI     $m, Y12, Y4   \
	VPAND   Y11, Y4, Y4   \
	VPOR    Y4, Y1, Y1    \
	LANES32(Y0, yoff(DI), sc1) \
	LANES32(Y1, yoff+32(DI), sc2)

// func dotRowsQ5_KQ8_KAVX2(x *byte, rb, n int, y *byte, nb int, out *float32)
//
// dotQ4_KQ8_KAVX2 for Q5_K's 176-byte blocks (d, dmin, the 12 scale
// bytes, 32 qh bytes, 128 qs bytes): the same scales, mins, lanes and
// float operations, the codes with their fifth bit (Q5K64); over n rows
// of rb bytes from x, out[i] = row i's minimums' sum plus its eight lanes
// in lane order (as minLanesAsm adds them). The row loop is here rather
// than a call and a Go loop a row (dotRowsQ4_KQ8_KAVX2P's reason); a
// single row (VecDot) is n = 1.
TEXT ·dotRowsQ5_KQ8_KAVX2(SB), NOSPLIT, $48-48
	MOVQ    x+0(FP), R13
	MOVQ    n+16(FP), AX
	MOVQ    AX, cnt-40(SP)
	MOVQ    out+40(FP), AX
	MOVQ    AX, outp-48(SP)
	VMOVDQU nib<>(SB), Y15
	VMOVDQU permidx<>(SB), Y14
	VMOVDQU lanemask<>(SB), Y13
	VMOVDQU sixteens<>(SB), Y11

q5krow:
	MOVQ   R13, SI
	MOVQ   y+24(FP), DI
	MOVQ   nb+32(FP), CX
	VXORPS Y10, Y10, Y10 // sums
	VXORPS X7, X7, X7    // sumf

q5kloop:
	K45HEAD

	VMOVDQU 16(SI), Y12        // qh
	VPXOR   Y9, Y9, Y9
	Q5K64(48, 4, scr-32(SP), scr-28(SP), VPSLLW, 4, VPSLLW, 3)
	Q5K64(80, 68, scr-24(SP), scr-20(SP), VPSLLW, 2, VPSLLW, 1)
	Q5K64(112, 132, scr-16(SP), scr-12(SP), VPSLLW, 0, VPSRLW, 1)
	Q5K64(144, 196, scr-8(SP), scr-4(SP), VPSRLW, 2, VPSRLW, 3)

	K45TAIL

	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q5kloop

	// sumf + sums[0] + sums[1] + … + sums[7], in that order.
	ADDLANES(Y10, X10, X7)
	ROWSTORE(X7, outp-48(SP))
	ROWNEXT(R13, q5krow)

	VZEROUPPER
	RET

// Q2K32 does the 32 elements of Q2_K chunk (k, j): codes (q2 >> 2j) & 3
// of the half's 32 q2 bytes (Y10), against q8 bytes yoff…yoff+31, the
// first 16 with sub-block scale 8k+2j and the last 16 with the next
// (the words at scaddr).
#define Q2K32(shift, yoff, scaddr) \
	VPSRLW $shift, Y10, Y0 \
	VPAND  Y15, Y0, Y0     \
	LANES32(Y0, yoff(DI), scaddr)

// func dotQ2_KQ8_KAVX2(x, y *byte, nb int) float32
//
// Per block (Q2_K: 16 scale bytes, 64 q2 bytes, d, dmin): summs = Σ
// bsums[j]·(sc[j] >> 4); isum = Σ over the 16 sub-blocks of (sc & 15) ·
// Σ q·y, exact integers in any order (LANES32's lanes, then added);
// sumf += dall·float32(isum) − dmin·float32(summs), dall = dy·d and dmin
// = dy·dmin, as the twin rounds them.
TEXT ·dotQ2_KQ8_KAVX2(SB), NOSPLIT, $32-28
	MOVQ    x+0(FP), SI
	MOVQ    y+8(FP), DI
	MOVQ    nb+16(FP), CX
	VMOVDQU threes<>(SB), Y15
	VMOVDQU permidx<>(SB), Y14
	VMOVDQU lanemask<>(SB), Y13
	VMOVDQU nib<>(SB), Y12
	VXORPS  X7, X7, X7

q2kloop:
	// The scales (low nibbles) as 16 int16 words to the scratch; summs
	// from the minimums (high nibbles) against the int16 bsums.
	VMOVDQU   (SI), X0
	VPAND     X12, X0, X1
	VPMOVZXBW X1, Y1
	VMOVDQU   Y1, scr-32(SP)
	VPSRLW    $4, X0, X2
	VPAND     X12, X2, X2
	VPMOVZXBW X2, Y2
	VPMADDWD  260(DI), Y2, Y2
	HSUM8(Y2, X2, X3)
	VCVTDQ2PS X2, X8          // float32(summs)

	VPXOR   Y9, Y9, Y9
	VMOVDQU 16(SI), Y10
	Q2K32(0, 4, scr-32(SP))
	Q2K32(2, 36, scr-28(SP))
	Q2K32(4, 68, scr-24(SP))
	Q2K32(6, 100, scr-20(SP))
	VMOVDQU 48(SI), Y10
	Q2K32(0, 132, scr-16(SP))
	Q2K32(2, 164, scr-12(SP))
	Q2K32(4, 196, scr-8(SP))
	Q2K32(6, 228, scr-4(SP))
	HSUM8(Y9, X9, X3)
	VCVTDQ2PS X9, X9          // float32(isum)

	VMOVSS  (DI), X3          // dy
	F16(80(SI), AX, X1)
	VMULSS  X1, X3, X1        // dall = dy·d
	VMULSS  X9, X1, X1        // dall·isum
	F16(82(SI), AX, X2)
	VMULSS  X2, X3, X2        // dmin = dy·dmin
	VMULSS  X8, X2, X2        // dmin·summs
	VSUBSS  X2, X1, X1
	VADDSS  X1, X7, X7

	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q2kloop

	VMOVSS     X7, ret+24(FP)
	VZEROUPPER
	RET

// Q3K32 does the 32 elements of Q3_K chunk (h, s) (elements 128h+32s …):
// unsigned codes (q3 >> 2s) & 3 of the half's 32 q3 bytes (Y10), plus 4
// where the element's hmask bit 4h+s is set (Y8, the 32 hmask bytes,
// shifted by HS n so that the bit lands on bit 2: a left shift of at most
// 2 or a right shift of at most 5 moves no bit of one byte onto bit 2 of
// the other), so that code − 4 is the twin's value (LANES32OFF with Y11 =
// 4 in every byte); q8 bytes yoff…, sub-block scales at scaddr.
#define Q3K32(qshift, HS, n, yoff, scaddr) \
	VPSRLW $qshift, Y10, Y0 \
	VPAND  Y15, Y0, Y0      \
	HS     $n, Y8, Y3       \
	VPAND  Y11, Y3, Y3      \
	VPOR   Y3, Y0, Y0       \
	LANES32OFF(Y0, yoff(DI), scaddr)

// func dotQ3_KQ8_KAVX2(x, y *byte, nb int, sums *[8]float32)
//
// Per block (Q3_K: 32 hmask bytes, 64 q3 bytes, 12 scale bytes, d): the
// 16 six-bit scales unpacked as GGML's dot does (four words of four,
// minus 32); aux lanes of Σ scale·v·y as the twin keeps them; sums[l] +=
// d·aux[l] (d = dx·dy). The caller adds the lanes.
TEXT ·dotQ3_KQ8_KAVX2(SB), NOSPLIT, $32-32
	MOVQ    x+0(FP), SI
	MOVQ    y+8(FP), DI
	MOVQ    nb+16(FP), CX
	VMOVDQU threes<>(SB), Y15
	VMOVDQU permidx<>(SB), Y14
	VMOVDQU lanemask<>(SB), Y13
	VMOVDQU fours<>(SB), Y11
	VXORPS  Y7, Y7, Y7

q3kloop:
	// Scales j = 0…15 as bytes: R8 = words 0, 1 (j 0…7), R10 = words 2, 3.
	MOVL 96(SI), AX
	MOVL 100(SI), BX
	MOVL 104(SI), DX
	MOVL AX, R8
	ANDL $0x0f0f0f0f, R8
	MOVL DX, R9
	ANDL $0x03030303, R9
	SHLL $4, R9
	ORL  R9, R8          // word 0
	MOVL BX, R9
	ANDL $0x0f0f0f0f, R9
	MOVL DX, R11
	SHRL $2, R11
	ANDL $0x03030303, R11
	SHLL $4, R11
	ORL  R11, R9         // word 1
	SHLQ $32, R9
	ORQ  R9, R8
	MOVL AX, R10
	SHRL $4, R10
	ANDL $0x0f0f0f0f, R10
	MOVL DX, R11
	SHRL $4, R11
	ANDL $0x03030303, R11
	SHLL $4, R11
	ORL  R11, R10        // word 2
	MOVL BX, R9
	SHRL $4, R9
	ANDL $0x0f0f0f0f, R9
	SHRL $6, DX
	ANDL $0x03030303, DX
	SHLL $4, DX
	ORL  DX, R9          // word 3
	SHLQ $32, R9
	ORQ  R9, R10
	VMOVQ     R8, X0
	VPINSRQ   $1, R10, X0, X0
	VPSUBB    thirtytwos<>(SB), X0, X0
	VPMOVSXBW X0, Y0
	VMOVDQU   Y0, scr-32(SP)

	VMOVDQU (SI), Y8          // hmask
	VPXOR   Y9, Y9, Y9
	VMOVDQU 32(SI), Y10
	Q3K32(0, VPSLLW, 2, 4, scr-32(SP))
	Q3K32(2, VPSLLW, 1, 36, scr-28(SP))
	Q3K32(4, VPSLLW, 0, 68, scr-24(SP))
	Q3K32(6, VPSRLW, 1, 100, scr-20(SP))
	VMOVDQU 64(SI), Y10
	Q3K32(0, VPSRLW, 2, 132, scr-16(SP))
	Q3K32(2, VPSRLW, 3, 164, scr-12(SP))
	Q3K32(4, VPSRLW, 4, 196, scr-8(SP))
	Q3K32(6, VPSRLW, 5, 228, scr-4(SP))

	F16(108(SI), AX, X1)
	VMULSS       (DI), X1, X1 // d = dx·dy
	VBROADCASTSS X1, Y1
	VCVTDQ2PS    Y9, Y9
	VMULPS       Y1, Y9, Y9
	VADDPS       Y9, Y7, Y7

	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q3kloop

	MOVQ       sums+24(FP), AX
	VMOVUPS    Y7, (AX)
	VZEROUPPER
	RET

// Q6KHALF does the 128 elements of Q6_K half h (ql bytes 64h…64h+63, qh
// bytes 128+32h…, q8 bytes 4+128h…), codes rebuilt as
//	q0 = ql0&15 | (qh<<4)&48   (elements  0…31)
//	q1 = ql1&15 | (qh<<2)&48   (32…63)
//	q2 = ql0>>4 | qh&48        (64…95)
//	q3 = ql1>>4 | (qh>>2)&48   (96…127)
// and the scale word pairs of sub-blocks 8h+2m, 8h+2m+1 at scr-32(SP)+4(4h+m).
#define Q6KHALF(qloff, qhoff, yoff, s0, s1, s2, s3) \
	VMOVDQU qloff(SI), Y0    \
	VMOVDQU qloff+32(SI), Y1 \
	VMOVDQU qhoff(SI), Y2    \
	VPSLLW  $4, Y2, Y3       \
	VPAND   Y12, Y3, Y3      \
	VPAND   Y15, Y0, Y4      \
	VPOR    Y3, Y4, Y4       \
	LANES32OFF(Y4, yoff(DI), s0) \
	VPSLLW  $2, Y2, Y3       \
	VPAND   Y12, Y3, Y3      \
	VPAND   Y15, Y1, Y4      \
	VPOR    Y3, Y4, Y4       \
	LANES32OFF(Y4, yoff+32(DI), s1) \
	VPSRLW  $4, Y0, Y0       \
	VPAND   Y15, Y0, Y0      \
	VPAND   Y12, Y2, Y3      \
	VPOR    Y3, Y0, Y0       \
	LANES32OFF(Y0, yoff+64(DI), s2) \
	VPSRLW  $4, Y1, Y1       \
	VPAND   Y15, Y1, Y1      \
	VPSRLW  $2, Y2, Y3       \
	VPAND   Y12, Y3, Y3      \
	VPOR    Y3, Y1, Y1       \
	LANES32OFF(Y1, yoff+96(DI), s3)

// Q6KTAIL ends a Q6_K block for the activation row at YADDR: its lanes
// ACC as floats times d = dx·dy, added to SUMS. Clobbers AX, X1.
#define Q6KTAIL(YADDR, ACC, SUMS) \
	F16(208(SI), AX, X1)         \
	VMULSS       YADDR, X1, X1   \
	VBROADCASTSS X1, Y1          \
	VCVTDQ2PS    ACC, ACC        \
	VMULPS       Y1, ACC, ACC    \
	VADDPS       ACC, SUMS, SUMS

// func dotRowsQ6_KQ8_KAVX2(x *byte, rb, n int, y *byte, nb int, out *float32)
//
// Per block of each of n rows of rb bytes from x: aux lanes of
// Σ sc·(q−32)·y as above; sums[l] += d·aux[l] (d = dx·dy); out[i] = row
// i's eight lanes added one by one in lane order from 0, as the twin adds
// them. The row loop is here rather than a call and a Go loop a row
// (dotRowsQ4_KQ8_KAVX2P's reason); a single row (VecDot) is n = 1.
TEXT ·dotRowsQ6_KQ8_KAVX2(SB), NOSPLIT, $48-48
	MOVQ    x+0(FP), R13
	MOVQ    n+16(FP), AX
	MOVQ    AX, cnt-40(SP)
	MOVQ    out+40(FP), AX
	MOVQ    AX, outp-48(SP)
	VMOVDQU nib<>(SB), Y15
	VMOVDQU permidx<>(SB), Y14
	VMOVDQU lanemask<>(SB), Y13
	VMOVDQU hi2<>(SB), Y12
	VMOVDQU thirtytwos<>(SB), Y11

q6krrow:
	MOVQ   R13, SI
	MOVQ   y+24(FP), DI
	MOVQ   nb+32(FP), CX
	VXORPS Y10, Y10, Y10

q6krloop:
	VPMOVSXBW 192(SI), Y0 // the 16 int8 scales as int16
	VMOVDQU   Y0, scr-32(SP)
	VPXOR     Y9, Y9, Y9
	Q6KHALF(0, 128, 4, scr-32(SP), scr-28(SP), scr-24(SP), scr-20(SP))
	Q6KHALF(64, 160, 132, scr-16(SP), scr-12(SP), scr-8(SP), scr-4(SP))

	Q6KTAIL((DI), Y9, Y10)

	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q6krloop

	// 0 + sums[0] + sums[1] + … + sums[7], in that order.
	VXORPS X7, X7, X7
	ADDLANES(Y10, X10, X7)
	ROWSTORE(X7, outp-48(SP))
	ROWNEXT(R13, q6krrow)

	VZEROUPPER
	RET

// ---- AVX-512 ----
//
// The two-row Q4_0·Q8_0 dot product with AVX-512 (F, BW, VBMI, VNNI; see
// dot_amd64.go), the same bits as dotQ4_0Q8_0x2AVX2 and so the twin.
//
// Four blocks at a time, as the AVX2 kernel, but with whole quads in
// 512-bit registers: VPERMT2B gathers the quad's 4 × 16 quant bytes from
// two overlapping loads of its 72 bytes (the loads stay inside the quad's
// bytes, so nothing past the rows is read), one VPDPBUSD per half
// multiplies the codes by the activations and adds each 4 products into a
// dword (exact: at most 4·15·128 a product group), and the block b's sum
// is the 4 dwords of 128-bit lane b. The offset −8·Σy starts each
// accumulator. The activations' side — their 4 × 32 bytes gathered from
// four loads of their 136 in the same order, −8·Σy by VPDPBUSD of 8s, the
// scales — is done once per activation row (prepQ4_0Y512Asm), not for
// every pair of weight rows: in cache the kernel alone took 7.8–8.6 µs
// against 9.0–10.0 for 64 rows × 4096 (six alternating pairs) when it
// gathered them itself, and with the preparation no slower for 2–8 rows.
// The float part is the AVX2 kernel's: float32(sumi)·dx·dy four at a
// time, added to each row's sum one block after another.
//
// Tried and dropped (session 33): a four-row form (the activations'
// gathers shared by four rows, four chains of additions): 10% faster in
// cache (64 rows × 4096, 8.2–8.9 against 9.4–9.8 µs, alternating) but
// slower on W13 (2.04– 2.58 against 1.49–2.38 ms, five alternating pairs,
// 3 of them slower), as the AVX2 four-row form was: four weight streams a
// core. (Session 34 found why, for the AVX-512 kernel that now takes four
// rows: a prefetch distance of two rows' bytes lands, for two of four
// rows, on bytes already being read; Q40PF512X4 prefetches a group of four
// rows ahead.)

// The two-row AVX-512 kernel this file had before (session 33) prefetched
// 4608 bytes ahead (PF); measured then, W13 with the prepared activations,
// five rounds alternating, each run against the read beside it: 2304 bytes
// 46–53% of the read, 4608 53–65%, 9216 58–64%, 18432 55–68%; into L2
// rather than L1 (PREFETCHT1 against T0) 47–77% against 35–63%. The
// four-row kernel's distance is its caller's (Q40PF512X4).

// VPERMT2B indices: byte 16b + i ← weight byte 18b + 2 + i (of the loads
// at 0 and 8).
DATA q40qs<>+0(SB)/8, $0x0908070605040302
DATA q40qs<>+8(SB)/8, $0x11100f0e0d0c0b0a
DATA q40qs<>+16(SB)/8, $0x1b1a191817161514
DATA q40qs<>+24(SB)/8, $0x232221201f1e1d1c
DATA q40qs<>+32(SB)/8, $0x2d2c2b2a29282726
DATA q40qs<>+40(SB)/8, $0x3534333231302f2e
DATA q40qs<>+48(SB)/8, $0x3f3e3d3c3b3a3938
DATA q40qs<>+56(SB)/8, $0x7f7e7d7c7b7a7978
GLOBL q40qs<>(SB), RODATA|NOPTR, $64

// VPERMT2B indices: byte 16b + i ← activation byte 34b + 2 + i (of the loads at 0 and 64).
DATA q40ylo<>+0(SB)/8, $0x0908070605040302
DATA q40ylo<>+8(SB)/8, $0x11100f0e0d0c0b0a
DATA q40ylo<>+16(SB)/8, $0x2b2a292827262524
DATA q40ylo<>+24(SB)/8, $0x333231302f2e2d2c
DATA q40ylo<>+32(SB)/8, $0x4d4c4b4a49484746
DATA q40ylo<>+40(SB)/8, $0x5554535251504f4e
DATA q40ylo<>+48(SB)/8, $0x6f6e6d6c6b6a6968
DATA q40ylo<>+56(SB)/8, $0x7776757473727170
GLOBL q40ylo<>(SB), RODATA|NOPTR, $64

// VPERMT2B indices: byte 16b + i ← activation byte 34b + 18 + i (of the loads at 8 and 72).
DATA q40yhi<>+0(SB)/8, $0x11100f0e0d0c0b0a
DATA q40yhi<>+8(SB)/8, $0x1918171615141312
DATA q40yhi<>+16(SB)/8, $0x333231302f2e2d2c
DATA q40yhi<>+24(SB)/8, $0x3b3a393837363534
DATA q40yhi<>+32(SB)/8, $0x5554535251504f4e
DATA q40yhi<>+40(SB)/8, $0x5d5c5b5a59585756
DATA q40yhi<>+48(SB)/8, $0x7776757473727170
DATA q40yhi<>+56(SB)/8, $0x7f7e7d7c7b7a7978
GLOBL q40yhi<>(SB), RODATA|NOPTR, $64

// VPERMW indices: word b ← word 9b (block b's d) of the weights' first load.
DATA q40xd<>+0(SB)/8, $0x001b001200090000
DATA q40xd<>+8(SB)/8, $0x0000000000000000
DATA q40xd<>+16(SB)/8, $0x0000000000000000
DATA q40xd<>+24(SB)/8, $0x0000000000000000
DATA q40xd<>+32(SB)/8, $0x0000000000000000
DATA q40xd<>+40(SB)/8, $0x0000000000000000
DATA q40xd<>+48(SB)/8, $0x0000000000000000
DATA q40xd<>+56(SB)/8, $0x0000000000000000
GLOBL q40xd<>(SB), RODATA|NOPTR, $64

// VPERMI2W indices: word b ← word 17b (block b's d) of the activations' loads at 0 and 64.
DATA q40yd<>+0(SB)/8, $0x0033002200110000
DATA q40yd<>+8(SB)/8, $0x0000000000000000
DATA q40yd<>+16(SB)/8, $0x0000000000000000
DATA q40yd<>+24(SB)/8, $0x0000000000000000
DATA q40yd<>+32(SB)/8, $0x0000000000000000
DATA q40yd<>+40(SB)/8, $0x0000000000000000
DATA q40yd<>+48(SB)/8, $0x0000000000000000
DATA q40yd<>+56(SB)/8, $0x0000000000000000
GLOBL q40yd<>(SB), RODATA|NOPTR, $64

// VPERMD indices: dword i ← dword i/4 (each of a quad's four scales four
// times, one for each weight row of dotQ4_0Q8_0x4AVX512).
DATA q40dy4<>+0(SB)/8, $0x0000000000000000
DATA q40dy4<>+8(SB)/8, $0x0000000000000000
DATA q40dy4<>+16(SB)/8, $0x0000000100000001
DATA q40dy4<>+24(SB)/8, $0x0000000100000001
DATA q40dy4<>+32(SB)/8, $0x0000000200000002
DATA q40dy4<>+40(SB)/8, $0x0000000200000002
DATA q40dy4<>+48(SB)/8, $0x0000000300000003
DATA q40dy4<>+56(SB)/8, $0x0000000300000003
GLOBL q40dy4<>(SB), RODATA|NOPTR, $64

// Q40ROW512(X, DX, ACC) computes row X's quad (X its base register): its
// four blocks' d in DX's low 4 words, and in ACC the dwords whose 128-bit
// lane b sums to block b's Σ q·y − 8·Σy (Z16 lowY, Z18 highY, Z21 −8·Σy).
// Clobbers Z0, Z1, Z3.
#define Q40ROW512(X, DX, ACC) \
	VMOVDQU64 0(X), Z0           \
	VMOVDQU64 8(X), Z1           \
	VPERMW    Z0, Z27, DX        \
	VPERMT2B  Z1, Z24, Z0        \
	VPSRLW    $4, Z0, Z3         \
	VPANDD    Z30, Z0, Z0        \
	VPANDD    Z30, Z3, Z3        \
	VMOVDQA64 Z21, ACC           \
	VPDPBUSD  Z16, Z0, ACC       \
	VPDPBUSD  Z18, Z3, ACC

// Q40PF512X4 prefetches the four rows (SI, R8, R10, R11) DX bytes ahead,
// into L2: the caller's DX is four rows, so each row's next quad is asked
// for in the next group of four rows, a group ahead of its use. Into L2
// (PREFETCHT1), as the two-row kernel measured best (session 33: 47–77% of
// the read against 35–63% into L1; one prefetch a row instead of two was
// worse; the AVX2 kernels' prefetches stay in L1, no better in L2).
// Measured (this 2-core Zen 4 VM, W13, each run against the read just
// before it, alternating): 4 rows (9,216 bytes) ahead 82–91% of the read,
// 8 rows 84–89%, the two-row kernel's 4,608 bytes (the third row's bytes,
// being read already, for two of the four rows) 58–62%, 1,024 bytes ahead
// in the same row 48–57%.
#define Q40PF512X4 \
	PREFETCHT1 (SI)(DX*1)    \
	PREFETCHT1 64(SI)(DX*1)  \
	PREFETCHT1 (R8)(DX*1)    \
	PREFETCHT1 64(R8)(DX*1)  \
	PREFETCHT1 (R10)(DX*1)   \
	PREFETCHT1 64(R10)(DX*1) \
	PREFETCHT1 (R11)(DX*1)   \
	PREFETCHT1 64(R11)(DX*1)

// Q40END512X4 ends a quad of four rows a–d (Q40ROW512's Z4, Z11, Z14, Z17;
// their scales in the low words of X2, X10, X13, X15; the activations' dy
// at R9, each four times): per 128-bit lane b (block b), the unpacks and
// adds leave [A B C D], the rows' sums of block b, so no permute is
// needed; then (float32(sumi)·dx)·dy, and the lanes added to the rows'
// sums in X7 block by block, GGML's order, four rows an add. Against the
// two-row kernel this replaced (the same end for two rows, lanes 0 and 1,
// and a VPERMD to pair the rows' blocks) 11 instructions fewer for four
// rows, and the chain of dependent adds, 4 a quad, serves four rows
// instead of two. Its two halves, Q40SUMS512X4 and Q40ADDS512X4, serve
// the Q8_0 kernel too (dotRowsQ8_0Q8_0AVX512P: sumi·(dx·dy) between them).
// Clobbers Z0, Z5, Z6, Z8, Z9, Z12, X2, X13.
#define Q40END512X4 \
	Q40SUMS512X4                 \
	VMULPS        Z8, Z5, Z5     \
	VMULPS        0(R9), Z5, Z5  \
	Q40ADDS512X4

// Q40SUMS512X4 leaves Q40END512X4's sums as float32 in Z5 (dword 4b + r:
// row r's block b) and the rows' dx in the same order in Z8.
#define Q40SUMS512X4 \
	VPUNPCKLDQ    Z11, Z4, Z5    \
	VPUNPCKHDQ    Z11, Z4, Z12   \
	VPADDD        Z12, Z5, Z5    \
	VPUNPCKLDQ    Z17, Z14, Z6   \
	VPUNPCKHDQ    Z17, Z14, Z12  \
	VPADDD        Z12, Z6, Z6    \
	VPUNPCKLQDQ   Z6, Z5, Z12    \
	VPUNPCKHQDQ   Z6, Z5, Z5     \
	VPADDD        Z12, Z5, Z5    \
	VCVTDQ2PS     Z5, Z5         \
	VPUNPCKLWD    X10, X2, X2    \
	VPUNPCKLWD    X15, X13, X13  \
	VPUNPCKLDQ    X13, X2, X8    \
	VPUNPCKHDQ    X13, X2, X9    \
	VINSERTI128   $1, X9, Y8, Y8 \
	VCVTPH2PS     Y8, Z8

// Q40ADDS512X4 adds the products in Z5 to the four rows' sums in X7, block
// by block (lane b is block b's four rows). Clobbers X0.
#define Q40ADDS512X4 \
	VADDPS        X5, X7, X7     \
	VEXTRACTF32X4 $1, Z5, X0     \
	VADDPS        X0, X7, X7     \
	VEXTRACTF32X4 $2, Z5, X0     \
	VADDPS        X0, X7, X7     \
	VEXTRACTF32X4 $3, Z5, X0     \
	VADDPS        X0, X7, X7

// func prepQ4_0Y512Asm(y, yp *byte, nq int)
//
// prepQ4_0Y512's layout of nq whole quads of Q8_0 activations at y into
// yp (64-byte aligned): per quad the 64 low and 64 high quant bytes in
// dotQ4_0Q8_0x4AVX512's order, the 16 dwords of −8·Σy (192 bytes), then,
// after all the quads, their scales as float32, each four times (64 bytes
// a quad: one for each of the four weight rows).
TEXT ·prepQ4_0Y512Asm(SB), NOSPLIT, $0-24
	MOVQ      y+0(FP), DI
	MOVQ      yp+8(FP), SI
	MOVQ      nq+16(FP), CX
	MOVQ      CX, R9
	IMUL3Q    $192, R9, R9
	ADDQ      SI, R9                // the scales, after the quads
	VMOVDQU64 q40ylo<>(SB), Z25
	VMOVDQU64 q40yhi<>(SB), Z26
	VMOVDQU64 q40yd<>(SB), Z28
	VMOVDQU64 q40dy4<>(SB), Z29
	VPBROADCASTQ eights<>(SB), Z31
	TESTQ     CX, CX
	JZ        q47done

q47quad:
	VMOVDQU64 0(DI), Z16
	VMOVDQU64 64(DI), Z17
	VMOVDQU64 8(DI), Z18
	VMOVDQU64 72(DI), Z19
	VMOVDQA64 Z28, Z9
	VPERMI2W  Z17, Z16, Z9
	VPERMT2B  Z17, Z25, Z16
	VPERMT2B  Z19, Z26, Z18
	VPXORD    Z20, Z20, Z20
	VPDPBUSD  Z16, Z31, Z20
	VPDPBUSD  Z18, Z31, Z20
	VPXORD    Z21, Z21, Z21
	VPSUBD    Z20, Z21, Z21
	VMOVDQA64 Z16, 0(SI)
	VMOVDQA64 Z18, 64(SI)
	VMOVDQA64 Z21, 128(SI)
	VCVTPH2PS X9, X9
	VPERMD    Z9, Z29, Z9
	VMOVDQA64 Z9, 0(R9)
	ADDQ      $136, DI
	ADDQ      $192, SI
	ADDQ      $64, R9
	DECQ      CX
	JNZ       q47quad

q47done:
	VZEROUPPER
	RET

// func dotQ4_0Q8_0x4AVX512(x0, x1, x2, x3, y, yp *byte, nb, ahead int, out *[4]float32)
//
// Four weight rows against activation row y, its whole quads prepared by
// prepQ4_0Y512Asm (yp); y itself gives the tail of nb mod 4 blocks, which
// the two-row AVX2 step (Q40STEP2) does for rows a, b and then c, d. Each
// row is prefetched ahead bytes past where it is read (Q40PF512X4).
TEXT ·dotQ4_0Q8_0x4AVX512(SB), NOSPLIT, $0-72
	MOVQ      x0+0(FP), SI
	MOVQ      x1+8(FP), R8
	MOVQ      x2+16(FP), R10
	MOVQ      x3+24(FP), R11
	MOVQ      yp+40(FP), DI
	MOVQ      nb+48(FP), CX
	MOVQ      ahead+56(FP), DX
	MOVQ      out+64(FP), R13
	MOVQ      CX, R9
	SHRQ      $2, R9
	IMUL3Q    $192, R9, R9
	ADDQ      DI, R9                // the scales, after the quads
	VMOVDQU64 q40qs<>(SB), Z24
	VMOVDQU64 q40xd<>(SB), Z27
	VPBROADCASTQ nib<>(SB), Z30
	VXORPS    X7, X7, X7
	CMPQ      CX, $4
	JLT       q48tail

q48quad:
	Q40PF512X4
	// The activations: lowY (Z16), highY (Z18), −8·Σy (Z21); dy at R9.
	VMOVDQA64 0(DI), Z16
	VMOVDQA64 64(DI), Z18
	VMOVDQA64 128(DI), Z21
	Q40ROW512(SI, Z2, Z4)
	Q40ROW512(R8, Z10, Z11)
	Q40ROW512(R10, Z13, Z14)
	Q40ROW512(R11, Z15, Z17)
	Q40END512X4
	ADDQ      $72, SI
	ADDQ      $72, R8
	ADDQ      $72, R10
	ADDQ      $72, R11
	ADDQ      $192, DI
	ADDQ      $64, R9
	SUBQ      $4, CX
	CMPQ      CX, $4
	JGE       q48quad

q48tail:
	VMOVUPS   X7, (R13)
	TESTQ     CX, CX
	JZ        q48done
	// The tail's blocks from the row itself, past its whole quads: rows
	// a, b, then c, d, each pair from its sums so far.
	MOVQ      nb+48(FP), DX
	SHRQ      $2, DX
	IMUL3Q    $136, DX, DX
	ADDQ      y+32(FP), DX
	MOVQ      CX, R12
	VMOVDQU   nib<>(SB), Y15
	VMOVDQU   eights<>(SB), Y14
	VMOVDQU   onesw<>(SB), Y13
	MOVQ      DX, DI
	VMOVSS    0(R13), X7
	VMOVSS    4(R13), X6

q48loop1:
	Q40STEP2
	DECQ      CX
	JNZ       q48loop1
	VMOVSS    X7, 0(R13)
	VMOVSS    X6, 4(R13)
	MOVQ      R10, SI
	MOVQ      R11, R8
	MOVQ      DX, DI
	MOVQ      R12, CX
	VMOVSS    8(R13), X7
	VMOVSS    12(R13), X6

q48loop2:
	Q40STEP2
	DECQ      CX
	JNZ       q48loop2
	VMOVSS    X7, 8(R13)
	VMOVSS    X6, 12(R13)

q48done:
	VZEROUPPER
	RET

// Q4K64P2 is Q4K64P against two activation rows at once: the 32 code
// bytes loaded, permuted and split into nibbles once, then multiplied by
// row a's prepared q8 bytes (R12+ypoff, into Y9) and row b's (256 bytes
// further, into Y11): each row's integers as Q4K64P gives them.
#define Q4K64P2(qoff, ypoff, sc1, sc2) \
	VMOVDQU      qoff(SI), Y0   \
	VPERMD       Y0, Y14, Y0    \
	VPSHUFB      Y13, Y0, Y0    \
	VPSRLW       $4, Y0, Y1     \
	VPAND        Y15, Y0, Y0    \
	VPAND        Y15, Y1, Y1    \
	VPBROADCASTD sc1, Y6        \
	VPMADDUBSW   ypoff(R12), Y0, Y2 \
	VPMADDWD     Y6, Y2, Y2     \
	VPADDD       Y2, Y9, Y9     \
	VPMADDUBSW   ypoff+256(R12), Y0, Y3 \
	VPMADDWD     Y6, Y3, Y3     \
	VPADDD       Y3, Y11, Y11   \
	VPBROADCASTD sc2, Y6        \
	VPMADDUBSW   ypoff+32(R12), Y1, Y2 \
	VPMADDWD     Y6, Y2, Y2     \
	VPADDD       Y2, Y9, Y9     \
	VPMADDUBSW   ypoff+288(R12), Y1, Y3 \
	VPMADDWD     Y6, Y3, Y3     \
	VPADDD       Y3, Y11, Y11

// func dotRowsQ4_KQ8_KAVX2P2(x *byte, rb, n int, ya, yb, yp *byte, nb int, outA, outB *float32)
//
// dotRowsQ4_KQ8_KAVX2P against two Q8_K activation rows ya and yb, their
// quants prepared into one buffer yp (prepQ4_KY2: per block ya's 256
// bytes, then yb's): each weight block's scales, minimums and codes are
// unpacked once for both (K45HEAD's, with row b's minimums' sum beside
// row a's), and each activation row gets the integers, float operations
// and bits that dotRowsQ4_KQ8_KAVX2P gives it alone, in outA and outB.
// Registers: row a's lanes Y9, sums Y10, sumf X7, sumi X8; row b's Y11,
// Y12, X4, X5; the weight row R14.
TEXT ·dotRowsQ4_KQ8_KAVX2P2(SB), NOSPLIT, $56-72
	MOVQ    x+0(FP), R14
	MOVQ    n+16(FP), AX
	MOVQ    AX, cnt-40(SP)
	MOVQ    outA+56(FP), AX
	MOVQ    AX, oa-48(SP)
	MOVQ    outB+64(FP), AX
	MOVQ    AX, ob-56(SP)
	VMOVDQU nib<>(SB), Y15
	VMOVDQU permidx<>(SB), Y14
	VMOVDQU lanemask<>(SB), Y13

q4krp2row:
	MOVQ   R14, SI
	MOVQ   ya+24(FP), DI
	MOVQ   yb+32(FP), R13
	MOVQ   yp+40(FP), R12
	MOVQ   nb+48(FP), CX
	VXORPS Y10, Y10, Y10
	VXORPS Y12, Y12, Y12
	VXORPS X7, X7, X7
	VXORPS X4, X4, X4

q4krp2loop:
	K45HEAD2
	VMOVAPS X3, X5 // row b's minimums' sum

	VPXOR Y9, Y9, Y9
	VPXOR Y11, Y11, Y11
	Q4K64P2(16, 0, scr-32(SP), scr-28(SP))
	Q4K64P2(48, 64, scr-24(SP), scr-20(SP))
	Q4K64P2(80, 128, scr-16(SP), scr-12(SP))
	Q4K64P2(112, 192, scr-8(SP), scr-4(SP))

	K45TAIL
	K45TAILR((R13), Y11, Y12, X5, X4)

	ADDQ $144, SI
	ADDQ $292, DI
	ADDQ $292, R13
	ADDQ $512, R12
	DECQ CX
	JNZ  q4krp2loop

	ADDLANES(Y10, X10, X7)
	ADDLANES(Y12, X12, X4)
	ROWSTORE(X7, oa-48(SP))
	ROWSTORE(X4, ob-56(SP))
	ROWNEXT(R14, q4krp2row)

	VZEROUPPER
	RET

// LANES32OFF2 is LANES32OFF for one weight row's codes Q against two
// activation rows (q8 bytes at ya and yb): the codes permuted and the
// scale broadcast once, then each row's products as LANES32OFF forms
// them, row a's into Y9 and row b's into Y7, through Y3 (free while the
// codes are multiplied).
#define LANES32OFF2(Q, ya, yb, scaddr) \
	VPERMD       Q, Y14, Q    \
	VPSHUFB      Y13, Q, Q    \
	VPBROADCASTD scaddr, Y6   \
	VPERMD       ya, Y14, Y5  \
	VPSHUFB      Y13, Y5, Y5  \
	VPMADDUBSW   Y5, Q, Y3    \
	VPMADDUBSW   Y5, Y11, Y5  \
	VPSUBW       Y5, Y3, Y3   \
	VPMADDWD     Y6, Y3, Y3   \
	VPADDD       Y3, Y9, Y9   \
	VPERMD       yb, Y14, Y5  \
	VPSHUFB      Y13, Y5, Y5  \
	VPMADDUBSW   Y5, Q, Y3    \
	VPMADDUBSW   Y5, Y11, Y5  \
	VPSUBW       Y5, Y3, Y3   \
	VPMADDWD     Y6, Y3, Y3   \
	VPADDD       Y3, Y7, Y7

// Q6KHALF2 is Q6KHALF against two activation rows (DI and R13).
#define Q6KHALF2(qloff, qhoff, yoff, s0, s1, s2, s3) \
	VMOVDQU qloff(SI), Y0    \
	VMOVDQU qloff+32(SI), Y1 \
	VMOVDQU qhoff(SI), Y2    \
	VPSLLW  $4, Y2, Y3       \
	VPAND   Y12, Y3, Y3      \
	VPAND   Y15, Y0, Y4      \
	VPOR    Y3, Y4, Y4       \
	LANES32OFF2(Y4, yoff(DI), yoff(R13), s0) \
	VPSLLW  $2, Y2, Y3       \
	VPAND   Y12, Y3, Y3      \
	VPAND   Y15, Y1, Y4      \
	VPOR    Y3, Y4, Y4       \
	LANES32OFF2(Y4, yoff+32(DI), yoff+32(R13), s1) \
	VPSRLW  $4, Y0, Y0       \
	VPAND   Y15, Y0, Y0      \
	VPAND   Y12, Y2, Y3      \
	VPOR    Y3, Y0, Y0       \
	LANES32OFF2(Y0, yoff+64(DI), yoff+64(R13), s2) \
	VPSRLW  $4, Y1, Y1       \
	VPAND   Y15, Y1, Y1      \
	VPSRLW  $2, Y2, Y3       \
	VPAND   Y12, Y3, Y3      \
	VPOR    Y3, Y1, Y1       \
	LANES32OFF2(Y1, yoff+96(DI), yoff+96(R13), s3)

// func dotRowsQ6_KQ8_KAVX2x2(x *byte, rb, n int, ya, yb *byte, nb int, outA, outB *float32)
//
// dotRowsQ6_KQ8_KAVX2 against two Q8_K activation rows: each weight
// block's scales and codes rebuilt once for both, each activation row's
// lanes, integers, float operations and bits as dotRowsQ6_KQ8_KAVX2 gives
// it alone, row i's sums in outA[i] and outB[i]. Row a's lanes Y9 and
// sums Y10; row b's Y7 and Y8; the weight row R14. The row loop is here
// rather than a call and a Go loop a row (dotRowsQ4_KQ8_KAVX2P's reason).
TEXT ·dotRowsQ6_KQ8_KAVX2x2(SB), NOSPLIT, $56-64
	MOVQ    x+0(FP), R14
	MOVQ    n+16(FP), AX
	MOVQ    AX, cnt-40(SP)
	MOVQ    outA+48(FP), AX
	MOVQ    AX, oa-48(SP)
	MOVQ    outB+56(FP), AX
	MOVQ    AX, ob-56(SP)
	VMOVDQU nib<>(SB), Y15
	VMOVDQU permidx<>(SB), Y14
	VMOVDQU lanemask<>(SB), Y13
	VMOVDQU hi2<>(SB), Y12
	VMOVDQU thirtytwos<>(SB), Y11

q6kx2row:
	MOVQ   R14, SI
	MOVQ   ya+24(FP), DI
	MOVQ   yb+32(FP), R13
	MOVQ   nb+40(FP), CX
	VXORPS Y10, Y10, Y10
	VXORPS Y8, Y8, Y8

q6kx2loop:
	VPMOVSXBW 192(SI), Y0      // the 16 int8 scales as int16
	VMOVDQU   Y0, scr-32(SP)
	VPXOR     Y9, Y9, Y9
	VPXOR     Y7, Y7, Y7
	Q6KHALF2(0, 128, 4, scr-32(SP), scr-28(SP), scr-24(SP), scr-20(SP))
	Q6KHALF2(64, 160, 132, scr-16(SP), scr-12(SP), scr-8(SP), scr-4(SP))

	Q6KTAIL((DI), Y9, Y10)
	Q6KTAIL((R13), Y7, Y8)

	ADDQ $210, SI
	ADDQ $292, DI
	ADDQ $292, R13
	DECQ CX
	JNZ  q6kx2loop

	// 0 + sums[0] + sums[1] + … + sums[7], in that order, for each row.
	VXORPS X3, X3, X3
	ADDLANES(Y10, X10, X3)
	VXORPS X4, X4, X4
	ADDLANES(Y8, X8, X4)
	ROWSTORE(X3, oa-48(SP))
	ROWSTORE(X4, ob-56(SP))
	ROWNEXT(R14, q6kx2row)

	VZEROUPPER
	RET

// LANES32x2 is LANES32 for one weight row's codes Q against two
// activation rows (q8 bytes at ya and yb): the codes permuted and the
// scale broadcast once, then each row's products as LANES32 forms them,
// row a's into Y9 and row b's into Y2, through Y3.
#define LANES32x2(Q, ya, yb, scaddr) \
	VPERMD       Q, Y14, Q    \
	VPSHUFB      Y13, Q, Q    \
	VPBROADCASTD scaddr, Y6   \
	VPERMD       ya, Y14, Y5  \
	VPSHUFB      Y13, Y5, Y5  \
	VPMADDUBSW   Y5, Q, Y3    \
	VPMADDWD     Y6, Y3, Y3   \
	VPADDD       Y3, Y9, Y9   \
	VPERMD       yb, Y14, Y5  \
	VPSHUFB      Y13, Y5, Y5  \
	VPMADDUBSW   Y5, Q, Y3    \
	VPMADDWD     Y6, Y3, Y3   \
	VPADDD       Y3, Y2, Y2

// Q5K64x2 is Q5K64 against two activation rows (DI and R13): Y3 and Y4
// are free once the codes are built.
#define Q5K64x2(qoff, yoff, sc1, sc2, SLO, n, SHI, m) \
	VMOVDQU qoff(SI), Y0  \
	VPSRLW  $4, Y0, Y1    \
	VPAND   Y15, Y0, Y0   \
	VPAND   Y15, Y1, Y1   \
	SLO     $n, Y12, Y3   \
	VPAND   Y11, Y3, Y3   \
	VPOR    Y3, Y0, Y0    \
	SHI     $m, Y12, Y4   \
	VPAND   Y11, Y4, Y4   \
	VPOR    Y4, Y1, Y1    \
	LANES32x2(Y0, yoff(DI), yoff(R13), sc1) \
	LANES32x2(Y1, yoff+32(DI), yoff+32(R13), sc2)

// q4kperm64 is LANES32's permutation of each 32 code bytes (byte 4l+i
// of each 32 is byte l+8i of them) as one VPERMB index over 64 bytes:
// two Q4_K chunks at once (dotRowsQ4_KQ8_KAVX512P).
DATA q4kperm64<>+0(SB)/8, $0x1911090118100800
DATA q4kperm64<>+8(SB)/8, $0x1b130b031a120a02
DATA q4kperm64<>+16(SB)/8, $0x1d150d051c140c04
DATA q4kperm64<>+24(SB)/8, $0x1f170f071e160e06
DATA q4kperm64<>+32(SB)/8, $0x3931292138302820
DATA q4kperm64<>+40(SB)/8, $0x3b332b233a322a22
DATA q4kperm64<>+48(SB)/8, $0x3d352d253c342c24
DATA q4kperm64<>+56(SB)/8, $0x3f372f273e362e26
GLOBL q4kperm64<>(SB), RODATA|NOPTR, $64

// q4kscidx holds four VPERMD indices into a Q4_K block's eight scale
// dwords (K45SCALES's scratch), each picking one scale for the low eight
// dwords and one for the high eight: 0|2, 1|3, 4|6, 5|7 — the scales of
// a chunk pair's low nibbles and of its high nibbles.
DATA q4kscidx<>+0(SB)/8, $0x0000000000000000
DATA q4kscidx<>+8(SB)/8, $0x0000000000000000
DATA q4kscidx<>+16(SB)/8, $0x0000000000000000
DATA q4kscidx<>+24(SB)/8, $0x0000000000000000
DATA q4kscidx<>+32(SB)/8, $0x0000000200000002
DATA q4kscidx<>+40(SB)/8, $0x0000000200000002
DATA q4kscidx<>+48(SB)/8, $0x0000000200000002
DATA q4kscidx<>+56(SB)/8, $0x0000000200000002
DATA q4kscidx<>+64(SB)/8, $0x0000000100000001
DATA q4kscidx<>+72(SB)/8, $0x0000000100000001
DATA q4kscidx<>+80(SB)/8, $0x0000000100000001
DATA q4kscidx<>+88(SB)/8, $0x0000000100000001
DATA q4kscidx<>+96(SB)/8, $0x0000000300000003
DATA q4kscidx<>+104(SB)/8, $0x0000000300000003
DATA q4kscidx<>+112(SB)/8, $0x0000000300000003
DATA q4kscidx<>+120(SB)/8, $0x0000000300000003
DATA q4kscidx<>+128(SB)/8, $0x0000000400000004
DATA q4kscidx<>+136(SB)/8, $0x0000000400000004
DATA q4kscidx<>+144(SB)/8, $0x0000000400000004
DATA q4kscidx<>+152(SB)/8, $0x0000000400000004
DATA q4kscidx<>+160(SB)/8, $0x0000000600000006
DATA q4kscidx<>+168(SB)/8, $0x0000000600000006
DATA q4kscidx<>+176(SB)/8, $0x0000000600000006
DATA q4kscidx<>+184(SB)/8, $0x0000000600000006
DATA q4kscidx<>+192(SB)/8, $0x0000000500000005
DATA q4kscidx<>+200(SB)/8, $0x0000000500000005
DATA q4kscidx<>+208(SB)/8, $0x0000000500000005
DATA q4kscidx<>+216(SB)/8, $0x0000000500000005
DATA q4kscidx<>+224(SB)/8, $0x0000000700000007
DATA q4kscidx<>+232(SB)/8, $0x0000000700000007
DATA q4kscidx<>+240(SB)/8, $0x0000000700000007
DATA q4kscidx<>+248(SB)/8, $0x0000000700000007
GLOBL q4kscidx<>(SB), RODATA|NOPTR, $256

// Q4K128CODES loads two Q4_K chunks, qs bytes qoff…qoff+63 (chunks 2p
// and 2p+1), permutes each 32 as LANES32 permutes codes (one VPERMB by
// Z24) and splits them: low nibbles in Z0 (elements of scales 4p and
// 4p+2), high nibbles in Z1 (4p+1 and 4p+3).
#define Q4K128CODES(qoff) \
	VMOVDQU64 qoff(SI), Z0 \
	VPERMB    Z0, Z24, Z0  \
	VPSRLW    $4, Z0, Z1   \
	VPANDD    Z30, Z0, Z0  \
	VPANDD    Z30, Z1, Z1

// Q4K128ROW multiplies codes C by one activation row's prepared q8 bytes
// at yaddr (prepQ4_KY512: a chunk pair's low-nibble elements, or its
// high-nibble ones, 64 bytes) and by the scale words SC, into the sixteen
// int32 lanes ACC: dword k of the low 256 bits is lane k of chunk 2p, of
// the high 256 bits lane k of chunk 2p+1. Clobbers Z2.
#define Q4K128ROW(C, yaddr, SC, ACC) \
	VPMADDUBSW yaddr, C, Z2 \
	VPMADDWD   SC, Z2, Z2   \
	VPADDD     Z2, ACC, ACC

// Q4K128 does a chunk pair of row R12's prepared activations at ypoff: the
// codes (Q4K128CODES), then each nibble set times its scale dwords,
// picked from Z13 (the block's eight, K45SCALES's scratch) by ILO and IHI,
// into Z9.
#define Q4K128(qoff, ypoff, ILO, IHI) \
	Q4K128CODES(qoff)                 \
	VPERMD    Z13, ILO, Z6            \
	Q4K128ROW(Z0, ypoff(R12), Z6, Z9) \
	VPERMD    Z13, IHI, Z6            \
	Q4K128ROW(Z1, ypoff+64(R12), Z6, Z9)

// FOLD16 adds the high eight int32 lanes of Z into its low eight (Y).
// Clobbers Y2.
#define FOLD16(Z, Y) \
	VEXTRACTI64X4 $1, Z, Y2 \
	VPADDD        Y2, Y, Y

// Q4K512CONSTS loads the AVX-512 Q4_K kernels' constants: the code
// permutation (Z24), the nibble mask (Z30), the scale indices (Z16–Z19).
#define Q4K512CONSTS \
	VMOVDQU64    q4kperm64<>(SB), Z24       \
	VPBROADCASTQ nib<>(SB), Z30             \
	VMOVDQU64    q4kscidx<>+0(SB), Z16      \
	VMOVDQU64    q4kscidx<>+64(SB), Z17     \
	VMOVDQU64    q4kscidx<>+128(SB), Z18    \
	VMOVDQU64    q4kscidx<>+192(SB), Z19

// func dotRowsQ4_KQ8_KAVX512P(x *byte, rb, n int, y, yp *byte, nb int, out *float32)
//
// dotRowsQ4_KQ8_KAVX2P with the codes' products on 512-bit registers
// (AVX-512 F, BW and VBMI): two chunks of a block a step (Q4K128: 13
// instructions for 128 elements, where Q4K64P takes 28), the block's 16
// int32 lanes then added pairwise into the twin's 8 (lane k of each
// chunk is the twin's aux[k]; integers, so the same sums), and
// K45HEAD and K45TAIL as there: the same lanes, integers, float
// operations and bits, row after row. yp holds y's quants prepared by
// prepQ4_KY512 (256 bytes a block).
TEXT ·dotRowsQ4_KQ8_KAVX512P(SB), NOSPLIT, $48-56
	MOVQ      x+0(FP), R13
	MOVQ      n+16(FP), AX
	MOVQ      AX, cnt-40(SP)
	MOVQ      out+48(FP), AX
	MOVQ      AX, outp-48(SP)
	Q4K512CONSTS

q4k5row:
	MOVQ   R13, SI
	MOVQ   y+24(FP), DI
	MOVQ   yp+32(FP), R12
	MOVQ   nb+40(FP), CX
	VXORPS Y10, Y10, Y10 // sums
	VXORPS X7, X7, X7    // sumf

q4k5loop:
	K45HEAD
	VMOVDQU scr-32(SP), Y13 // the scale dwords (s, s), k = 0…7

	VPXORD Z9, Z9, Z9
	Q4K128(16, 0, Z16, Z17)
	Q4K128(80, 128, Z18, Z19)
	FOLD16(Z9, Y9)

	K45TAIL

	ADDQ $144, SI
	ADDQ $292, DI
	ADDQ $256, R12
	DECQ CX
	JNZ  q4k5loop

	// sumf + sums[0] + sums[1] + … + sums[7], in that order.
	ADDLANES(Y10, X10, X7)
	ROWSTORE(X7, outp-48(SP))
	ROWNEXT(R13, q4k5row)

	VZEROUPPER
	RET

// Q4K128P2 is Q4K128 against two activation rows: the codes split and
// the scales picked once, then row a's products (prepared q8 bytes at
// R12+ypoff) into Z9 and row b's (256 bytes further) into Z11.
#define Q4K128P2(qoff, ypoff, ILO, IHI) \
	Q4K128CODES(qoff)                      \
	VPERMD    Z13, ILO, Z6                 \
	Q4K128ROW(Z0, ypoff(R12), Z6, Z9)      \
	Q4K128ROW(Z0, ypoff+256(R12), Z6, Z11) \
	VPERMD    Z13, IHI, Z6                 \
	Q4K128ROW(Z1, ypoff+64(R12), Z6, Z9)   \
	Q4K128ROW(Z1, ypoff+320(R12), Z6, Z11)

// func dotRowsQ4_KQ8_KAVX512P2(x *byte, rb, n int, ya, yb, yp *byte, nb int, outA, outB *float32)
//
// dotRowsQ4_KQ8_KAVX2P2 with the codes' products on 512-bit registers, as
// dotRowsQ4_KQ8_KAVX512P does them: each weight block's scales, minimums
// and codes unpacked once for both activation rows, each row's lanes,
// integers, float operations and bits as dotRowsQ4_KQ8_KAVX512P (and so
// the AVX2 kernels and the twin) gives it alone. yp holds both rows'
// quants prepared by prepQ4_KY2_512 (per block a's 256 bytes, then b's).
// Registers as dotRowsQ4_KQ8_KAVX2P2's, the lanes in Z9 and Z11.
TEXT ·dotRowsQ4_KQ8_KAVX512P2(SB), NOSPLIT, $56-72
	MOVQ      x+0(FP), R14
	MOVQ      n+16(FP), AX
	MOVQ      AX, cnt-40(SP)
	MOVQ      outA+56(FP), AX
	MOVQ      AX, oa-48(SP)
	MOVQ      outB+64(FP), AX
	MOVQ      AX, ob-56(SP)
	Q4K512CONSTS

q4k5p2row:
	MOVQ   R14, SI
	MOVQ   ya+24(FP), DI
	MOVQ   yb+32(FP), R13
	MOVQ   yp+40(FP), R12
	MOVQ   nb+48(FP), CX
	VXORPS Y10, Y10, Y10
	VXORPS Y12, Y12, Y12
	VXORPS X7, X7, X7
	VXORPS X4, X4, X4

q4k5p2loop:
	K45HEAD2
	VMOVAPS X3, X5          // row b's minimums' sum
	VMOVDQU scr-32(SP), Y13 // the scale dwords (s, s), k = 0…7

	VPXORD Z9, Z9, Z9
	VPXORD Z11, Z11, Z11
	Q4K128P2(16, 0, Z16, Z17)
	Q4K128P2(80, 128, Z18, Z19)
	FOLD16(Z9, Y9)
	FOLD16(Z11, Y11)

	K45TAIL
	K45TAILR((R13), Y11, Y12, X5, X4)

	ADDQ $144, SI
	ADDQ $292, DI
	ADDQ $292, R13
	ADDQ $512, R12
	DECQ CX
	JNZ  q4k5p2loop

	ADDLANES(Y10, X10, X7)
	ADDLANES(Y12, X12, X4)
	ROWSTORE(X7, oa-48(SP))
	ROWSTORE(X4, ob-56(SP))
	ROWNEXT(R14, q4k5p2row)

	VZEROUPPER
	RET

// func dotRowsQ5_KQ8_KAVX2x2(x *byte, rb, n int, ya, yb *byte, nb int, outA, outB *float32)
//
// dotRowsQ5_KQ8_KAVX2 against two Q8_K activation rows: each weight
// block's scales, minimums and codes unpacked once for both, each
// activation row's lanes, integers, float operations and bits as
// dotRowsQ5_KQ8_KAVX2 gives it alone, row i's sums in outA[i] and
// outB[i]. Row a as there (Y9, Y10, X7, X8); row b's lanes in Y2 and its
// sums, sumf and minimums' sum on the stack (bsum, bf, bi: the registers
// are all taken), added to in the same order; the weight row R14.
TEXT ·dotRowsQ5_KQ8_KAVX2x2(SB), NOSPLIT, $96-64
	MOVQ    x+0(FP), R14
	MOVQ    n+16(FP), AX
	MOVQ    AX, cnt-40(SP)
	MOVQ    outA+48(FP), AX
	MOVQ    AX, oa-88(SP)
	MOVQ    outB+56(FP), AX
	MOVQ    AX, ob-96(SP)
	VMOVDQU nib<>(SB), Y15
	VMOVDQU permidx<>(SB), Y14
	VMOVDQU lanemask<>(SB), Y13
	VMOVDQU sixteens<>(SB), Y11

q5kx2row:
	MOVQ    R14, SI
	MOVQ    ya+24(FP), DI
	MOVQ    yb+32(FP), R13
	MOVQ    nb+40(FP), CX
	VXORPS  Y10, Y10, Y10
	VXORPS  X7, X7, X7
	VXORPS  Y2, Y2, Y2
	VMOVUPS Y2, bsum-72(SP)
	VMOVSS  X2, bf-76(SP)

q5kx2loop:
	K45HEAD2 // row b's minimums' sum to bi
	VMOVSS      X3, bi-80(SP)

	VMOVDQU 16(SI), Y12        // qh
	VPXOR   Y9, Y9, Y9
	VPXOR   Y2, Y2, Y2
	Q5K64x2(48, 4, scr-32(SP), scr-28(SP), VPSLLW, 4, VPSLLW, 3)
	Q5K64x2(80, 68, scr-24(SP), scr-20(SP), VPSLLW, 2, VPSLLW, 1)
	Q5K64x2(112, 132, scr-16(SP), scr-12(SP), VPSLLW, 0, VPSRLW, 1)
	Q5K64x2(144, 196, scr-8(SP), scr-4(SP), VPSRLW, 2, VPSRLW, 3)

	// Row b's tail (R13, on the stack) first: K45TAIL's scratch X2 would
	// clear row b's lanes in Y2. Then K45TAIL for row a (DI).
	VMOVSS       (R13), X3
	F16((SI), AX, X1)
	VMULSS       X3, X1, X1
	VBROADCASTSS X1, Y1
	VCVTDQ2PS    Y2, Y2
	VMULPS       Y1, Y2, Y2
	VADDPS       bsum-72(SP), Y2, Y2
	VMOVUPS      Y2, bsum-72(SP)
	F16(2(SI), AX, X2)
	VMULSS       X3, X2, X2
	VMULSS       bi-80(SP), X2, X2
	VMOVSS       bf-76(SP), X1
	VSUBSS       X2, X1, X1
	VMOVSS       X1, bf-76(SP)
	K45TAIL

	ADDQ $176, SI
	ADDQ $292, DI
	ADDQ $292, R13
	DECQ CX
	JNZ  q5kx2loop

	// sumf + sums[0] + sums[1] + … + sums[7], in that order, for each row
	// (as minLanesAsm adds them).
	ADDLANES(Y10, X10, X7)
	VMOVUPS bsum-72(SP), Y3
	VMOVSS  bf-76(SP), X4
	ADDLANES(Y3, X3, X4)
	ROWSTORE(X7, oa-88(SP))
	ROWSTORE(X4, ob-96(SP))
	ROWNEXT(R14, q5kx2row)

	VZEROUPPER
	RET

// ---- AVX-512 Q6_K ----

// q6kqhidx holds two VPERMB indices over a Q6_K block's 64 qh bytes:
// half h's 32 (bytes 32h…32h+31) permuted as LANES32 permutes codes
// (q4kperm64's permutation of one 32), in both 256-bit halves.
DATA q6kqhidx<>+0(SB)/8, $0x1911090118100800
DATA q6kqhidx<>+8(SB)/8, $0x1b130b031a120a02
DATA q6kqhidx<>+16(SB)/8, $0x1d150d051c140c04
DATA q6kqhidx<>+24(SB)/8, $0x1f170f071e160e06
DATA q6kqhidx<>+32(SB)/8, $0x1911090118100800
DATA q6kqhidx<>+40(SB)/8, $0x1b130b031a120a02
DATA q6kqhidx<>+48(SB)/8, $0x1d150d051c140c04
DATA q6kqhidx<>+56(SB)/8, $0x1f170f071e160e06
DATA q6kqhidx<>+64(SB)/8, $0x3931292138302820
DATA q6kqhidx<>+72(SB)/8, $0x3b332b233a322a22
DATA q6kqhidx<>+80(SB)/8, $0x3d352d253c342c24
DATA q6kqhidx<>+88(SB)/8, $0x3f372f273e362e26
DATA q6kqhidx<>+96(SB)/8, $0x3931292138302820
DATA q6kqhidx<>+104(SB)/8, $0x3b332b233a322a22
DATA q6kqhidx<>+112(SB)/8, $0x3d352d253c342c24
DATA q6kqhidx<>+120(SB)/8, $0x3f372f273e362e26
GLOBL q6kqhidx<>(SB), RODATA|NOPTR, $128

// q6kshift holds the word shift counts that move each code's two qh bits
// to bits 4 and 5: left by 4 (elements 0…31 of a half) and 2 (32…63),
// then right by 0 (64…95) and 2 (96…127).
DATA q6kshift<>+0(SB)/8, $0x0004000400040004
DATA q6kshift<>+8(SB)/8, $0x0004000400040004
DATA q6kshift<>+16(SB)/8, $0x0004000400040004
DATA q6kshift<>+24(SB)/8, $0x0004000400040004
DATA q6kshift<>+32(SB)/8, $0x0002000200020002
DATA q6kshift<>+40(SB)/8, $0x0002000200020002
DATA q6kshift<>+48(SB)/8, $0x0002000200020002
DATA q6kshift<>+56(SB)/8, $0x0002000200020002
DATA q6kshift<>+64(SB)/8, $0x0000000000000000
DATA q6kshift<>+72(SB)/8, $0x0000000000000000
DATA q6kshift<>+80(SB)/8, $0x0000000000000000
DATA q6kshift<>+88(SB)/8, $0x0000000000000000
DATA q6kshift<>+96(SB)/8, $0x0002000200020002
DATA q6kshift<>+104(SB)/8, $0x0002000200020002
DATA q6kshift<>+112(SB)/8, $0x0002000200020002
DATA q6kshift<>+120(SB)/8, $0x0002000200020002
GLOBL q6kshift<>(SB), RODATA|NOPTR, $128

// q6kscidx holds four VPERMD indices into a Q6_K block's sixteen scales
// as words (eight dwords, dword m the pair of sub-blocks 2m and 2m+1):
// 0|1, 2|3, 4|5, 6|7 — the scale pairs of the 64 elements k64…k64+63.
DATA q6kscidx<>+0(SB)/8, $0x0000000000000000
DATA q6kscidx<>+8(SB)/8, $0x0000000000000000
DATA q6kscidx<>+16(SB)/8, $0x0000000000000000
DATA q6kscidx<>+24(SB)/8, $0x0000000000000000
DATA q6kscidx<>+32(SB)/8, $0x0000000100000001
DATA q6kscidx<>+40(SB)/8, $0x0000000100000001
DATA q6kscidx<>+48(SB)/8, $0x0000000100000001
DATA q6kscidx<>+56(SB)/8, $0x0000000100000001
DATA q6kscidx<>+64(SB)/8, $0x0000000200000002
DATA q6kscidx<>+72(SB)/8, $0x0000000200000002
DATA q6kscidx<>+80(SB)/8, $0x0000000200000002
DATA q6kscidx<>+88(SB)/8, $0x0000000200000002
DATA q6kscidx<>+96(SB)/8, $0x0000000300000003
DATA q6kscidx<>+104(SB)/8, $0x0000000300000003
DATA q6kscidx<>+112(SB)/8, $0x0000000300000003
DATA q6kscidx<>+120(SB)/8, $0x0000000300000003
DATA q6kscidx<>+128(SB)/8, $0x0000000400000004
DATA q6kscidx<>+136(SB)/8, $0x0000000400000004
DATA q6kscidx<>+144(SB)/8, $0x0000000400000004
DATA q6kscidx<>+152(SB)/8, $0x0000000400000004
DATA q6kscidx<>+160(SB)/8, $0x0000000500000005
DATA q6kscidx<>+168(SB)/8, $0x0000000500000005
DATA q6kscidx<>+176(SB)/8, $0x0000000500000005
DATA q6kscidx<>+184(SB)/8, $0x0000000500000005
DATA q6kscidx<>+192(SB)/8, $0x0000000600000006
DATA q6kscidx<>+200(SB)/8, $0x0000000600000006
DATA q6kscidx<>+208(SB)/8, $0x0000000600000006
DATA q6kscidx<>+216(SB)/8, $0x0000000600000006
DATA q6kscidx<>+224(SB)/8, $0x0000000700000007
DATA q6kscidx<>+232(SB)/8, $0x0000000700000007
DATA q6kscidx<>+240(SB)/8, $0x0000000700000007
DATA q6kscidx<>+248(SB)/8, $0x0000000700000007
GLOBL q6kscidx<>(SB), RODATA|NOPTR, $256

// Q6K512CONSTS loads the AVX-512 Q6_K kernels' constants: the code
// permutation (Z24), the qh permutations of halves 0 and 1 (Z25, Z26),
// the qh shifts (Z27 left, Z28 right), the 0x30 mask (Z29), the nibble
// mask (Z30), the scale indices (Z16–Z19).
#define Q6K512CONSTS \
	VMOVDQU64    q4kperm64<>(SB), Z24      \
	VMOVDQU64    q6kqhidx<>+0(SB), Z25     \
	VMOVDQU64    q6kqhidx<>+64(SB), Z26    \
	VMOVDQU64    q6kshift<>+0(SB), Z27     \
	VMOVDQU64    q6kshift<>+64(SB), Z28    \
	VPBROADCASTQ hi2<>(SB), Z29            \
	VPBROADCASTQ nib<>(SB), Z30            \
	VMOVDQU64    q6kscidx<>+0(SB), Z16     \
	VMOVDQU64    q6kscidx<>+64(SB), Z17    \
	VMOVDQU64    q6kscidx<>+128(SB), Z18   \
	VMOVDQU64    q6kscidx<>+192(SB), Z19

// Q6K512SCALES sign-extends the block's sixteen int8 scales to words and
// picks the four scale-dword vectors of its 64-element quarters (Z20–Z23:
// dword pair 2k in the low 256 bits, 2k+1 in the high). Clobbers Z5.
#define Q6K512SCALES \
	VPMOVSXBW 192(SI), Y5 \
	VPERMD    Z5, Z16, Z20 \
	VPERMD    Z5, Z17, Z21 \
	VPERMD    Z5, Z18, Z22 \
	VPERMD    Z5, Z19, Z23

// Q6K512CODES rebuilds the 128 codes of half h (ql bytes qloff…+63, qh
// bytes 128+32h…, QHIDX that half's qh permutation), each 32 permuted as
// LANES32 permutes codes: elements 0…63 of the half in Z2, 64…127 in Z1
// (Q6KHALF's q0|q1 and q2|q3). Clobbers Z0.
#define Q6K512CODES(qloff, QHIDX) \
	VPERMB     qloff(SI), Z24, Z0   \
	VPERMB     128(SI), QHIDX, Z1   \
	VPSLLVW    Z27, Z1, Z2          \
	VPANDD     Z29, Z2, Z2          \
	VPTERNLOGD $0xf8, Z30, Z0, Z2   \
	VPSRLW     $4, Z0, Z0           \
	VPSRLVW    Z28, Z1, Z1          \
	VPANDD     Z29, Z1, Z1          \
	VPTERNLOGD $0xf8, Z30, Z0, Z1

// Q6K512ROW multiplies 64 codes C by one activation row's prepared q8
// bytes at ypoff(YB) (prepQ6_KY512) and subtracts its 32·(pair sums)
// words 256 bytes further (the −32 offset: Q6KHALF's arithmetic), then
// adds the scale-weighted pairs to ACC's sixteen int32 lanes (dword k of
// each 256 bits is lane k): OP is VPMADDWD to start ACC, VPDPWSSD (VNNI)
// to add to it. Clobbers Z3.
#define Q6K512ROW(C, ypoff, YB, SC, OP, ACC) \
	VPMADDUBSW ypoff(YB), C, Z3     \
	VPSUBW     ypoff+256(YB), Z3, Z3 \
	OP         SC, Z3, ACC

// func dotRowsQ6_KQ8_KAVX512P(x *byte, rb, n int, y, yp *byte, nb int, out *float32)
//
// dotRowsQ6_KQ8_KAVX2 with the codes on 512-bit registers (AVX-512 F, BW,
// VBMI, VNNI): a half's 64 ql bytes and its 32 qh bytes (doubled) each
// permuted by one VPERMB as LANES32 permutes codes (a byte's nibbles and
// its qh bits are the same lane's, so the bytes are permuted before the
// codes are rebuilt, three VPERMB a block where the AVX2 kernel does
// sixteen VPERMD and VPSHUFB on codes), the codes rebuilt 64 at a time
// (shift, mask, VPTERNLOGD), and their products with the activations
// prepared once a call (prepQ6_KY512: the q8 bytes permuted, which the
// AVX2 kernel does again for every weight row, and 32·(y_l + y_l+8) as
// words, so that the −32 is one VPSUBW: the same int16 pairs as
// LANES32OFF's) scaled by VPDPWSSD: 64 elements in 3 instructions where
// LANES32OFF takes 10 for 32; a block is ~55 instructions against ~135.
// The block's 16 int32 lanes are added pairwise into the twin's 8 (lane k
// of each 32 elements is the twin's aux[k]; exact integers, so the same
// sums), then Q6KTAIL as there: the same lanes, integers, float
// operations and bits, row after row (TestQ6_KRowsAVX512).
//
// Session 53, this project's 2-core AMD EPYC VM (Zen 5), against the AVX2
// kernel (LOOM_CPU_AVX512=off), alternating: 64 rows of 4,096 weights in
// cache (BenchmarkVecDotRows q6_k, 215 KB) 5.0–5.4 µs (40–43 GB/s)
// against 10.6–12.0 µs (17–20 GB/s); 11,309 such rows (38 MB,
// BenchmarkVecDotRowsMem) on one thread 29–36 GB/s (median ~34) against
// 16–19 GB/s. It asks for the weights PF bytes ahead, four lines a block
// (a block is 210 bytes): without, 19–32 GB/s from memory (median ~29,
// same VM, six rounds alternating, five runs each), the same in cache.
TEXT ·dotRowsQ6_KQ8_KAVX512P(SB), NOSPLIT, $48-56
	MOVQ x+0(FP), R13
	MOVQ n+16(FP), AX
	MOVQ AX, cnt-40(SP)
	MOVQ out+48(FP), AX
	MOVQ AX, outp-48(SP)
	Q6K512CONSTS

q6k5row:
	MOVQ   R13, SI
	MOVQ   y+24(FP), DI
	MOVQ   yp+32(FP), R12
	MOVQ   nb+40(FP), CX
	VXORPS Y10, Y10, Y10

q6k5loop:
	PREFETCHT0 PF(SI)
	PREFETCHT0 PF+64(SI)
	PREFETCHT0 PF+128(SI)
	PREFETCHT0 PF+192(SI)
	Q6K512SCALES
	Q6K512CODES(0, Z25)
	Q6K512ROW(Z2, 0, R12, Z20, VPMADDWD, Z9)
	Q6K512ROW(Z1, 64, R12, Z21, VPDPWSSD, Z9)
	Q6K512CODES(64, Z26)
	Q6K512ROW(Z2, 128, R12, Z22, VPDPWSSD, Z9)
	Q6K512ROW(Z1, 192, R12, Z23, VPDPWSSD, Z9)
	FOLD16(Z9, Y9)
	Q6KTAIL((DI), Y9, Y10)

	ADDQ $210, SI
	ADDQ $292, DI
	ADDQ $512, R12
	DECQ CX
	JNZ  q6k5loop

	// 0 + sums[0] + sums[1] + … + sums[7], in that order.
	VXORPS X7, X7, X7
	ADDLANES(Y10, X10, X7)
	ROWSTORE(X7, outp-48(SP))
	ROWNEXT(R13, q6k5row)

	VZEROUPPER
	RET

// func dotRowsQ6_KQ8_KAVX512P2(x *byte, rb, n int, ya, yb, yp *byte, nb int, outA, outB *float32)
//
// dotRowsQ6_KQ8_KAVX512P against two activation rows: each weight
// block's scales and codes rebuilt once for both, each row's lanes,
// integers, float operations and bits as dotRowsQ6_KQ8_KAVX512P (and so
// the AVX2 kernels and the twin) gives it alone. yp holds both rows'
// prepared activations (prepQ6_KY2_512: per block a's 512 bytes, then
// b's). Row a's lanes Z9 and sums Y10, row b's Z11 and Y12. Session 53's
// Zen 5 VM, 64 rows of 4,096 weights in cache against two activation
// rows (BenchmarkVecDotRows2 q6_k/pair, alternating): 7.9–8.4 µs against
// 17.8–19.6 with dotRowsQ6_KQ8_KAVX2x2. No prefetch (twice the work a
// byte: not timed from memory).
TEXT ·dotRowsQ6_KQ8_KAVX512P2(SB), NOSPLIT, $56-72
	MOVQ x+0(FP), R14
	MOVQ n+16(FP), AX
	MOVQ AX, cnt-40(SP)
	MOVQ outA+56(FP), AX
	MOVQ AX, oa-48(SP)
	MOVQ outB+64(FP), AX
	MOVQ AX, ob-56(SP)
	Q6K512CONSTS

q6k5p2row:
	MOVQ   R14, SI
	MOVQ   ya+24(FP), DI
	MOVQ   yb+32(FP), R13
	MOVQ   yp+40(FP), R12
	MOVQ   nb+48(FP), CX
	VXORPS Y10, Y10, Y10
	VXORPS Y12, Y12, Y12

q6k5p2loop:
	Q6K512SCALES
	Q6K512CODES(0, Z25)
	Q6K512ROW(Z2, 0, R12, Z20, VPMADDWD, Z9)
	Q6K512ROW(Z2, 512, R12, Z20, VPMADDWD, Z11)
	Q6K512ROW(Z1, 64, R12, Z21, VPDPWSSD, Z9)
	Q6K512ROW(Z1, 576, R12, Z21, VPDPWSSD, Z11)
	Q6K512CODES(64, Z26)
	Q6K512ROW(Z2, 128, R12, Z22, VPDPWSSD, Z9)
	Q6K512ROW(Z2, 640, R12, Z22, VPDPWSSD, Z11)
	Q6K512ROW(Z1, 192, R12, Z23, VPDPWSSD, Z9)
	Q6K512ROW(Z1, 704, R12, Z23, VPDPWSSD, Z11)
	FOLD16(Z9, Y9)
	FOLD16(Z11, Y11)

	Q6KTAIL((DI), Y9, Y10)
	Q6KTAIL((R13), Y11, Y12)

	ADDQ $210, SI
	ADDQ $292, DI
	ADDQ $292, R13
	ADDQ $1024, R12
	DECQ CX
	JNZ  q6k5p2loop

	// 0 + sums[0] + sums[1] + … + sums[7], in that order, for each row.
	VXORPS X3, X3, X3
	ADDLANES(Y10, X10, X3)
	VXORPS X4, X4, X4
	ADDLANES(Y12, X12, X4)
	ROWSTORE(X3, oa-48(SP))
	ROWSTORE(X4, ob-56(SP))
	ROWNEXT(R14, q6k5p2row)

	VZEROUPPER
	RET

// func prepQ6_KY512Asm(y, yp *byte, nb, stride int)
//
// prepQ6_KY512's layout of the nb Q8_K blocks of y, block i's 512 bytes at
// yp + i·stride: each 64 quants permuted by q4kperm64 (each 32 as LANES32
// permutes codes), then 32·(the pairs' sums) as int16 words (VPMADDUBSW
// of 32s and those bytes: the offset term LANES32OFF forms), each 64
// quants' 32 words 256 bytes after them.
TEXT ·prepQ6_KY512Asm(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	MOVQ         yp+8(FP), SI
	MOVQ         nb+16(FP), CX
	MOVQ         stride+24(FP), DX
	VMOVDQU64    q4kperm64<>(SB), Z24
	VPBROADCASTQ thirtytwos<>(SB), Z29

q6kyblock:
	MOVQ $0, AX

q6kyquarter:
	VPERMB     4(DI)(AX*1), Z24, Z0
	VMOVDQU64  Z0, (SI)(AX*1)
	VPMADDUBSW Z0, Z29, Z1
	VMOVDQU64  Z1, 256(SI)(AX*1)
	ADDQ       $64, AX
	CMPQ       AX, $256
	JLT        q6kyquarter

	ADDQ $292, DI
	ADDQ DX, SI
	DECQ CX
	JNZ  q6kyblock

	VZEROUPPER
	RET

// ---- AVX-512 Q5_K ----

// Q5K512CONSTS loads the AVX-512 Q5_K kernels' constants: Q4K512CONSTS's,
// the qh permutation (Z25: the 32 qh bytes permuted as LANES32 permutes
// codes, in both 256-bit halves: q6kqhidx's first), the word shifts that
// move a chunk pair's qh bits to bit 4 (Z27: left 4 | left 2, Z28: right
// 0 | right 2, q6kshift's), and 0x10 in every byte (Z29).
#define Q5K512CONSTS \
	Q4K512CONSTS                       \
	VMOVDQU64    q6kqhidx<>+0(SB), Z25 \
	VMOVDQU64    q6kshift<>+0(SB), Z27 \
	VMOVDQU64    q6kshift<>+64(SB), Z28 \
	VPBROADCASTQ sixteens<>(SB), Z29

// Q5K512QH permutes the block's 32 qh bytes (at 16(SI); the load's other
// 32 bytes, qs, are not picked) as the codes are permuted, into both
// halves of Z14 (byte l holds bit 2j of chunk j's element l and bit
// 2j+1 of its element 32+l), and Z15 is Z14's words shifted right by one
// (the odd bits at the even places: a byte's bits 0, 2, 4, 6 are its own
// bits 1, 3, 5, 7).
#define Q5K512QH \
	VPERMB 16(SI), Z25, Z14 \
	VPSRLW $1, Z14, Z15

// Q5K128CODES is Q4K128CODES for Q5_K chunks 2p and 2p+1 (qs bytes
// qoff…qoff+63) with each code's fifth bit: SHIFT by CNT (VPSLLVW by Z27
// for p = 0, VPSRLVW by Z28 for p = 1) moves bit 2j of Z14 (chunk j's low
// nibbles: bits 0 | 2, 4 | 6 of the two halves) and of Z15 (its high
// nibbles: bits 1 | 3, 5 | 7) to bit 4, which VPTERNLOGD (A | B&C) keeps
// (Z29) and adds to the nibbles. A word shift left by at most 4, or right
// by at most 2 from bit 6, moves no bit of the other byte into bit 4.
// Codes are 0…31, as Q5K64's. Clobbers Z2.
#define Q5K128CODES(qoff, SHIFT, CNT) \
	Q4K128CODES(qoff)               \
	SHIFT      CNT, Z14, Z2         \
	VPTERNLOGD $0xf8, Z29, Z2, Z0   \
	SHIFT      CNT, Z15, Z2         \
	VPTERNLOGD $0xf8, Z29, Z2, Z1

// Q5K128ROW multiplies codes C by one activation row's prepared q8 bytes
// at yaddr and adds the pairs times the scale words SC to ACC's sixteen
// int32 lanes: Q4K128ROW with VPDPWSSD (VNNI) for its VPMADDWD and VPADDD
// (the same wrapping int32 sums). Clobbers Z2.
#define Q5K128ROW(C, yaddr, SC, ACC) \
	VPMADDUBSW yaddr, C, Z2 \
	VPDPWSSD   SC, Z2, ACC

// Q5K128PROD multiplies a chunk pair's codes (Z0, Z1: Q5K128CODES) by row
// R12's prepared activations at ypoff (prepQ4_KY512: the pair's low-nibble
// elements, then its high ones), each nibble set times its scale dwords
// picked from Z13 by ILO and IHI (Q4K128's), into Z9.
#define Q5K128PROD(ypoff, ILO, IHI) \
	VPERMD    Z13, ILO, Z6             \
	Q5K128ROW(Z0, ypoff(R12), Z6, Z9)  \
	VPERMD    Z13, IHI, Z6             \
	Q5K128ROW(Z1, ypoff+64(R12), Z6, Z9)

// Q5K128PROD2 is Q5K128PROD against two activation rows: row a's products
// (R12+ypoff) into Z9, row b's (256 bytes further) into Z11.
#define Q5K128PROD2(ypoff, ILO, IHI) \
	VPERMD    Z13, ILO, Z6                 \
	Q5K128ROW(Z0, ypoff(R12), Z6, Z9)      \
	Q5K128ROW(Z0, ypoff+256(R12), Z6, Z11) \
	VPERMD    Z13, IHI, Z6                 \
	Q5K128ROW(Z1, ypoff+64(R12), Z6, Z9)   \
	Q5K128ROW(Z1, ypoff+320(R12), Z6, Z11)

// func dotRowsQ5_KQ8_KAVX512P(x *byte, rb, n int, y, yp *byte, nb int, out *float32)
//
// dotRowsQ5_KQ8_KAVX2 as dotRowsQ4_KQ8_KAVX512P does Q4_K: K45HEAD, then
// two chunks a step on 512-bit registers — the qs bytes permuted by one
// VPERMB as LANES32 permutes codes and split into nibbles (Q4K128CODES),
// the block's qh bytes permuted once by one VPERMB the same way and each
// chunk's fifth bit put in by a shift and a VPTERNLOGD (Q5K128CODES), the
// products with y's quants prepared once a call (prepQ4_KY512, Q4_K's
// layout: the AVX2 kernel permutes them again for every weight row) by
// Q5K128PROD — then the 16 int32 lanes added pairwise into the twin's 8
// (FOLD16) and K45TAIL: the same lanes, integers, float operations and
// bits, row after row (TestQ5_KRowsAVX512). A block is ~90 instructions
// against ~165.
//
// Session 53's Zen 5 VM, against the AVX2 kernel (LOOM_CPU_AVX512=off),
// alternating, five runs each: 64 rows of 4,096 weights in cache
// (BenchmarkVecDotRows q5_k) 6.7–7.1 µs against 11.2–11.7; 38 MB of rows
// on one thread (BenchmarkVecDotRowsMem) 22–26 GB/s against 14–16. Tried
// and taken back (same VM, the same bits): the products' VPMADDWD and
// VPADDD (Q4K128ROW) instead of one VPDPWSSD: 6.9–7.7 µs against
// 6.6–7.1; three PREFETCHT0 a block PF ahead (Q6_K's): from memory
// 18–27 GB/s against 22–26, no better.
TEXT ·dotRowsQ5_KQ8_KAVX512P(SB), NOSPLIT, $48-56
	MOVQ x+0(FP), R13
	MOVQ n+16(FP), AX
	MOVQ AX, cnt-40(SP)
	MOVQ out+48(FP), AX
	MOVQ AX, outp-48(SP)
	Q5K512CONSTS

q5k5row:
	MOVQ   R13, SI
	MOVQ   y+24(FP), DI
	MOVQ   yp+32(FP), R12
	MOVQ   nb+40(FP), CX
	VXORPS Y10, Y10, Y10 // sums
	VXORPS X7, X7, X7    // sumf

q5k5loop:
	K45HEAD
	VMOVDQU scr-32(SP), Y13 // the scale dwords (s, s), k = 0…7
	Q5K512QH

	VPXORD Z9, Z9, Z9
	Q5K128CODES(48, VPSLLVW, Z27)
	Q5K128PROD(0, Z16, Z17)
	Q5K128CODES(112, VPSRLVW, Z28)
	Q5K128PROD(128, Z18, Z19)
	FOLD16(Z9, Y9)

	K45TAIL

	ADDQ $176, SI
	ADDQ $292, DI
	ADDQ $256, R12
	DECQ CX
	JNZ  q5k5loop

	// sumf + sums[0] + sums[1] + … + sums[7], in that order.
	ADDLANES(Y10, X10, X7)
	ROWSTORE(X7, outp-48(SP))
	ROWNEXT(R13, q5k5row)

	VZEROUPPER
	RET

// func dotRowsQ5_KQ8_KAVX512P2(x *byte, rb, n int, ya, yb, yp *byte, nb int, outA, outB *float32)
//
// dotRowsQ5_KQ8_KAVX512P against two activation rows, as
// dotRowsQ4_KQ8_KAVX512P2 does Q4_K: each weight block's scales, minimums
// and codes unpacked once for both, each row's lanes, integers, float
// operations and bits as dotRowsQ5_KQ8_KAVX512P (and so the AVX2 kernels
// and the twin) gives it alone. yp holds both rows' quants prepared by
// prepQ4_KY2_512. Row a's lanes Z9, sums Y10, sumf X7; row b's Z11, Y12,
// X4 (its minimums' sum X5). Session 53's Zen 5 VM, 64 rows of 4,096
// weights in cache against two activation rows (BenchmarkVecDotRows2
// q5_k/pair, alternating): 10.0–10.4 µs against 17.1–18.5 with
// dotRowsQ5_KQ8_KAVX2x2.
TEXT ·dotRowsQ5_KQ8_KAVX512P2(SB), NOSPLIT, $56-72
	MOVQ x+0(FP), R14
	MOVQ n+16(FP), AX
	MOVQ AX, cnt-40(SP)
	MOVQ outA+56(FP), AX
	MOVQ AX, oa-48(SP)
	MOVQ outB+64(FP), AX
	MOVQ AX, ob-56(SP)
	Q5K512CONSTS

q5k5p2row:
	MOVQ   R14, SI
	MOVQ   ya+24(FP), DI
	MOVQ   yb+32(FP), R13
	MOVQ   yp+40(FP), R12
	MOVQ   nb+48(FP), CX
	VXORPS Y10, Y10, Y10
	VXORPS Y12, Y12, Y12
	VXORPS X7, X7, X7
	VXORPS X4, X4, X4

q5k5p2loop:
	K45HEAD2
	VMOVAPS X3, X5          // row b's minimums' sum
	VMOVDQU scr-32(SP), Y13 // the scale dwords (s, s), k = 0…7
	Q5K512QH

	VPXORD Z9, Z9, Z9
	VPXORD Z11, Z11, Z11
	Q5K128CODES(48, VPSLLVW, Z27)
	Q5K128PROD2(0, Z16, Z17)
	Q5K128CODES(112, VPSRLVW, Z28)
	Q5K128PROD2(128, Z18, Z19)
	FOLD16(Z9, Y9)
	FOLD16(Z11, Y11)

	K45TAIL
	K45TAILR((R13), Y11, Y12, X5, X4)

	ADDQ $176, SI
	ADDQ $292, DI
	ADDQ $292, R13
	ADDQ $512, R12
	DECQ CX
	JNZ  q5k5p2loop

	ADDLANES(Y10, X10, X7)
	ADDLANES(Y12, X12, X4)
	ROWSTORE(X7, oa-48(SP))
	ROWSTORE(X4, ob-56(SP))
	ROWNEXT(R14, q5k5p2row)

	VZEROUPPER
	RET

// ---- AVX-512 Q8_0 ----

// Q80ROW512(X, DX, ACC) is Q40ROW512 for Q8_0 weights: row X's quad (136
// bytes) gathered as prepQ4_0Y512Asm gathers the activations' (VPERMT2B
// by q40ylo, Z25, and q40yhi, Z26, from loads at 0 and 64, 8 and 72: each
// lane b block b's quants 0–15, then 16–31), its four blocks' d in DX's
// low 4 words (VPERMI2W by q40yd, Z28), and in ACC the dwords whose
// 128-bit lane b sums to block b's Σ x·y: VPDPBUSD takes unsigned bytes,
// so the quants are flipped to x+128 (0…255, VPXORD of 0x80, Z31) and
// ACC starts at −128·Σy (Z21): exact (four products a dword, at most
// 4·255·128). Clobbers Z0, Z1.
#define Q80ROW512(X, DX, ACC) \
	VMOVDQU64 0(X), Z0       \
	VMOVDQU64 8(X), Z1       \
	VMOVDQA64 Z28, DX        \
	VPERMI2W  64(X), Z0, DX  \
	VPERMT2B  64(X), Z25, Z0 \
	VPERMT2B  72(X), Z26, Z1 \
	VPXORD    Z31, Z0, Z0    \
	VPXORD    Z31, Z1, Z1    \
	VMOVDQA64 Z21, ACC       \
	VPDPBUSD  Z16, Z0, ACC   \
	VPDPBUSD  Z18, Z1, ACC

// Q80PF512X4 asks for the four rows' weights PF bytes ahead in each row,
// three lines a quad (136 bytes), into L1.
#define Q80PF512X4 \
	PREFETCHT0 PF(SI)       \
	PREFETCHT0 PF+64(SI)    \
	PREFETCHT0 PF+128(SI)   \
	PREFETCHT0 PF(R8)       \
	PREFETCHT0 PF+64(R8)    \
	PREFETCHT0 PF+128(R8)   \
	PREFETCHT0 PF(R10)      \
	PREFETCHT0 PF+64(R10)   \
	PREFETCHT0 PF+128(R10)  \
	PREFETCHT0 PF(R11)      \
	PREFETCHT0 PF+64(R11)   \
	PREFETCHT0 PF+128(R11)

// func dotRowsQ8_0Q8_0AVX512P(x *byte, rb, n int, y, yp *byte, nb int, out *float32)
//
// dotRowsQ8_0Q8_0AVX2 four rows at a time, as dotQ4_0Q8_0x4AVX512 does
// Q4_0, on the same prepared activations (prepQ4_0Y512: each quad's
// quants gathered, −8·Σy, which ×16 is the −128·Σy Q80ROW512 starts
// from, and the scales as float32, each four times): per quad of blocks
// Q80ROW512 for each of the four rows (the AVX2 kernel sign-extends y
// again for every row and block), Q40SUMS512X4 (block b's four row sums in
// lane b), sumi·(dx·dy) as the twin rounds it, and each block's four
// products added to the four rows' sums by one VADDPS, GGML's order
// (Q40ADDS512X4). The last nb mod 4 blocks of each row, from y itself, are
// dotRowsQ8_0Q8_0AVX2's loop. A last group of one to three rows repeats
// its first row for the missing ones and stores only its own. The rows
// are prefetched PF bytes ahead in each row (Q80PF512X4). The same
// integers, float operations and bits (TestQ8_0RowsAVX512).
//
// Session 53's Zen 5 VM, against the AVX2 kernel (LOOM_CPU_AVX512=off),
// alternating, five runs each: 64 rows of 4,096 weights in cache
// (BenchmarkVecDotRows q8_0, 278 KB) 4.2–4.4 µs against 14.7–16.2; 38 MB
// of rows on one thread (BenchmarkVecDotRowsMem) 20–27 GB/s against
// 16–18. Tried and taken back (same VM): Q4_0's prefetch, a group of four
// rows ahead into L2 (Q40PF512X4): 5.3–5.7 µs in cache, 19–24 GB/s from
// memory; with a third line a quad, 19–21 GB/s.
TEXT ·dotRowsQ8_0Q8_0AVX512P(SB), NOSPLIT, $32-56
	MOVQ      x+0(FP), R14
	MOVQ      n+16(FP), AX
	MOVQ      AX, cnt-24(SP)
	MOVQ      out+48(FP), AX
	MOVQ      AX, outp-32(SP)
	VMOVDQU64 q40ylo<>(SB), Z25
	VMOVDQU64 q40yhi<>(SB), Z26
	VMOVDQU64 q40yd<>(SB), Z28
	MOVL      $0x80, AX
	VPBROADCASTB AX, Z31

q85group:
	// Rows a–d: R14 and the next three, or R14 again past the last row.
	MOVQ    rb+8(FP), BX
	MOVQ    cnt-24(SP), AX
	MOVQ    R14, SI
	LEAQ    (R14)(BX*1), R8
	CMPQ    AX, $2
	CMOVQLT R14, R8
	LEAQ    (R14)(BX*2), R10
	CMPQ    AX, $3
	CMOVQLT R14, R10
	LEAQ    (R14)(BX*2), R11
	ADDQ    BX, R11
	CMPQ    AX, $4
	CMOVQLT R14, R11
	MOVQ    yp+32(FP), DI
	MOVQ    nb+40(FP), CX
	MOVQ    CX, R9
	SHRQ    $2, R9
	IMUL3Q  $192, R9, R9
	ADDQ    DI, R9                // the scales, after the quads
	VXORPS  X7, X7, X7
	CMPQ    CX, $4
	JLT     q85tail

q85quad:
	Q80PF512X4
	// The activations: lowY (Z16), highY (Z18), −128·Σy (Z21); dy at R9.
	VMOVDQA64 0(DI), Z16
	VMOVDQA64 64(DI), Z18
	VPSLLD    $4, 128(DI), Z21
	Q80ROW512(SI, Z2, Z4)
	Q80ROW512(R8, Z10, Z11)
	Q80ROW512(R10, Z13, Z14)
	Q80ROW512(R11, Z15, Z17)
	Q40SUMS512X4
	VMULPS    0(R9), Z8, Z8       // dx·dy
	VMULPS    Z8, Z5, Z5          // sumi·(dx·dy)
	Q40ADDS512X4
	ADDQ      $136, SI
	ADDQ      $136, R8
	ADDQ      $136, R10
	ADDQ      $136, R11
	ADDQ      $192, DI
	ADDQ      $64, R9
	SUBQ      $4, CX
	CMPQ      CX, $4
	JGE       q85quad

q85tail:
	VMOVUPS X7, s-16(SP)
	TESTQ   CX, CX
	JZ      q85store
	// The last nb mod 4 blocks, row after row, from y past its quads.
	MOVQ    nb+40(FP), R12
	SHRQ    $2, R12
	IMUL3Q  $136, R12, R12
	ADDQ    y+24(FP), R12
	LEAQ    s-16(SP), R13
	MOVQ    $4, DX

q85trow:
	MOVQ   R12, DI
	MOVQ   CX, R9
	VMOVSS (R13), X7

q85tloop:
	Q80BLOCK
	DECQ      R9
	JNZ       q85tloop

	VMOVSS X7, (R13)
	ADDQ   $4, R13
	MOVQ   R8, SI
	MOVQ   R10, R8
	MOVQ   R11, R10
	DECQ   DX
	JNZ    q85trow

q85store:
	// The group's sums to out: four, or the rows left.
	MOVQ    outp-32(SP), AX
	MOVQ    cnt-24(SP), BX
	CMPQ    BX, $4
	JLT     q85part
	VMOVUPS s-16(SP), X0
	VMOVUPS X0, (AX)
	ADDQ    $16, AX
	MOVQ    AX, outp-32(SP)
	MOVQ    rb+8(FP), DX
	SHLQ    $2, DX
	ADDQ    DX, R14
	SUBQ    $4, BX
	MOVQ    BX, cnt-24(SP)
	JNZ     q85group
	JMP     q85done

q85part:
	LEAQ s-16(SP), R13
	MOVQ $0, DX

q85partloop:
	MOVL (R13)(DX*4), R9
	MOVL R9, (AX)(DX*4)
	INCQ DX
	CMPQ DX, BX
	JLT  q85partloop

q85done:
	VZEROUPPER
	RET
