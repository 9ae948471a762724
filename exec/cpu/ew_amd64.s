#include "textflag.h"

// Elementwise float32 loops with AVX2, 8 lanes at a time; n is a multiple
// of 8. Each is exactly the IEEE operation of the scalar Go loop it stands
// in for (no fused multiply-add), so results are bit-identical.

// func binF32(dst, x, y *float32, n int, op int)  op: 0 add, 1 sub, 2 mul, 3 div
TEXT ·binF32(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ op+32(FP), AX
	SHRQ $3, CX
	JZ   bdone
bloop:
	VMOVUPS (SI), Y0
	VMOVUPS (DX), Y1
	CMPQ    AX, $1
	JB      badd
	JE      bsub
	CMPQ    AX, $2
	JE      bmul
	VDIVPS  Y1, Y0, Y0
	JMP     bstore
badd:
	VADDPS Y1, Y0, Y0
	JMP    bstore
bsub:
	VSUBPS Y1, Y0, Y0
	JMP    bstore
bmul:
	VMULPS Y1, Y0, Y0
bstore:
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     bloop
bdone:
	VZEROUPPER
	RET

// func affineF32(dst, x *float32, n int, mul, add float32)
// x·mul + add, rounded after the multiply and after the add.
TEXT ·affineF32(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS mul+24(FP), Y2
	VBROADCASTSS add+28(FP), Y3
	SHRQ         $3, CX
	JZ           adone
aloop:
	VMOVUPS (SI), Y0
	VMULPS  Y2, Y0, Y0
	VADDPS  Y3, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     aloop
adone:
	VZEROUPPER
	RET

// func negF32(dst, x *float32, n int)
TEXT ·negF32(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS negsign<>(SB), Y2
	SHRQ         $3, CX
	JZ           ndone
nloop:
	VXORPS  (SI), Y2, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     nloop
ndone:
	VZEROUPPER
	RET

// CMPBODY compares 8 lanes with predicate IMM and stores 0/1 as 8 int64s.
#define CMPBODY(IMM, LABEL) \
LABEL: \
	VMOVUPS     (SI), Y0 \
	VCMPPS      $IMM, (DX), Y0, Y0 \
	VPSRLD      $31, Y0, Y0 \
	VEXTRACTI128 $1, Y0, X1 \
	VPMOVZXDQ   X0, Y2 \
	VPMOVZXDQ   X1, Y3 \
	VMOVDQU     Y2, (DI) \
	VMOVDQU     Y3, 32(DI) \
	ADDQ        $32, SI \
	ADDQ        $32, DX \
	ADDQ        $64, DI \
	DECQ        CX \
	JNZ         LABEL \
	JMP         cdone

// func cmpF32(dst *int64, x, y *float32, n int, pred int)
// pred: 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge (IEEE: NaN compares false but ne).
TEXT ·cmpF32(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ pred+32(FP), AX
	SHRQ $3, CX
	JZ   cdone
	CMPQ AX, $0
	JEQ  ceq
	CMPQ AX, $1
	JEQ  cne
	CMPQ AX, $2
	JEQ  clt
	CMPQ AX, $3
	JEQ  cle
	CMPQ AX, $4
	JEQ  cgt
	JMP  cge
	CMPBODY(0, ceq)
	CMPBODY(4, cne)
	CMPBODY(17, clt)
	CMPBODY(18, cle)
	CMPBODY(30, cgt)
	CMPBODY(29, cge)
cdone:
	VZEROUPPER
	RET

// func whereF32(dst *float32, c *int64, t, f *float32, n int)
// dst = c != 0 ? t : f.
TEXT ·whereF32(SB), NOSPLIT, $0-40
	MOVQ    dst+0(FP), DI
	MOVQ    c+8(FP), BX
	MOVQ    t+16(FP), SI
	MOVQ    f+24(FP), DX
	MOVQ    n+32(FP), CX
	VPXOR   Y7, Y7, Y7
	VMOVDQU lowdw<>(SB), Y6
	SHRQ    $3, CX
	JZ      wdone
wloop:
	VPCMPEQQ     (BX), Y7, Y0 // c[0:4] == 0
	VPCMPEQQ     32(BX), Y7, Y1
	VPERMD       Y0, Y6, Y0   // low dwords to the low half
	VPERMD       Y1, Y6, Y1
	VINSERTI128  $1, X1, Y0, Y0
	VMOVUPS      (SI), Y2
	VBLENDVPS    Y0, (DX), Y2, Y2 // c == 0 ? f : t
	VMOVUPS      Y2, (DI)
	ADDQ         $64, BX
	ADDQ         $32, SI
	ADDQ         $32, DX
	ADDQ         $32, DI
	DECQ         CX
	JNZ          wloop
wdone:
	VZEROUPPER
	RET

DATA negsign<>+0(SB)/4, $0x80000000
GLOBL negsign<>(SB), RODATA|NOPTR, $4
DATA lowdw<>+0(SB)/4, $0
DATA lowdw<>+4(SB)/4, $2
DATA lowdw<>+8(SB)/4, $4
DATA lowdw<>+12(SB)/4, $6
DATA lowdw<>+16(SB)/4, $0
DATA lowdw<>+20(SB)/4, $2
DATA lowdw<>+24(SB)/4, $4
DATA lowdw<>+28(SB)/4, $6
GLOBL lowdw<>(SB), RODATA|NOPTR, $32

// func binScalarF32(dst, x *float32, n int, s float32, op int)
// dst = x op s for one row value s (ops as binF32).
TEXT ·binScalarF32(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS s+24(FP), Y1
	MOVQ         op+32(FP), AX
	SHRQ         $3, CX
	JZ           sdone
sloop:
	VMOVUPS (SI), Y0
	CMPQ    AX, $1
	JB      sadd
	JE      ssub
	CMPQ    AX, $2
	JE      smul
	VDIVPS  Y1, Y0, Y0
	JMP     sstore
sadd:
	VADDPS Y1, Y0, Y0
	JMP    sstore
ssub:
	VSUBPS Y1, Y0, Y0
	JMP    sstore
smul:
	VMULPS Y1, Y0, Y0
sstore:
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     sloop
sdone:
	VZEROUPPER
	RET

// func sumF32(x *float32, n int) float32
// Sums n values (n a multiple of 32) with four 8-lane accumulators, then
// adds the lanes in a fixed order: deterministic, pairwise-like error.
TEXT ·sumF32(SB), NOSPLIT, $0-20
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	SHRQ   $5, CX
	JZ     sumfold
sumloop:
	VADDPS (SI), Y0, Y0
	VADDPS 32(SI), Y1, Y1
	VADDPS 64(SI), Y2, Y2
	VADDPS 96(SI), Y3, Y3
	ADDQ   $128, SI
	DECQ   CX
	JNZ    sumloop
sumfold:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, ret+16(FP)
	VZEROUPPER
	RET
