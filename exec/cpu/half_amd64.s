#include "textflag.h"

// func f16to32(dst *float32, src *uint16, n int)
// Widens n f16 values (n a multiple of 8) with F16C: exact.
TEXT ·f16to32(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   done

loop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop

done:
	VZEROUPPER
	RET

// func f32to16(dst *uint16, src *float32, n int)
// Narrows n float32 values (n a multiple of 8) with F16C, rounding to
// nearest even (immediate 0): the IEEE conversion, subnormals included.
TEXT ·f32to16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   done16

loop16:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       loop16

done16:
	VZEROUPPER
	RET

// func bf16to32(dst *float32, src *uint16, n int)
// Widens n bf16 values (n a multiple of 8): each the float32 whose high
// half it is (exact, NaN payloads kept).
TEXT ·bf16to32(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   donebf

loopbf:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loopbf

donebf:
	VZEROUPPER
	RET
