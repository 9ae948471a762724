#include "textflag.h"

// func vmath8(dst, x *float32, n int, mode int)
//
// The exp family over n float32 values (n a multiple of 8), 8 lanes at a
// time with AVX2 and FMA. Modes: 0 exp(x), 1 sigmoid(x) = 1/(1+exp(-x)),
// 2 silu(x) = x/(1+exp(-x)), 3 gelu(x) = x/(1+exp(-2u)), u = c(x + a·x³).
// exp(t): t = k·ln2 + r (|r| ≤ ln2/2, k = round(t·log2 e)), e^r by a
// degree-7 Taylor polynomial (error < 6e-9) in FMA Horner form, 2^k added to
// the exponent bits. Results whose exponent would be subnormal are computed
// as exp(t + 64·ln2)·2^-64, so the multiply rounds them correctly; t above
// 88.7228 gives +Inf; NaN inputs return NaN.
TEXT ·vmath8(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ mode+24(FP), DX
	SHRQ $3, CX
	JZ   done

	VBROADCASTSS log2e<>(SB), Y15
	VBROADCASTSS one<>(SB), Y14

loop:
	VMOVUPS (SI), Y0 // x

	// t (Y1) by mode
	CMPQ DX, $0
	JEQ  texp
	CMPQ DX, $3
	JEQ  tgelu
	VBROADCASTSS negone<>(SB), Y2
	VMULPS       Y2, Y0, Y1     // t = -x
	JMP          haveT

tgelu:
	VMULPS       Y0, Y0, Y2     // x²
	VBROADCASTSS gelua<>(SB), Y3
	VFMADD213PS  Y14, Y3, Y2    // 1 + a·x²
	VMULPS       Y0, Y2, Y2     // x + a·x³
	VBROADCASTSS neg2c<>(SB), Y3
	VMULPS       Y3, Y2, Y1     // t = -2c(x + a·x³)
	JMP          haveT

texp:
	VMOVAPS Y0, Y1
	JMP     clamp

haveT:
	// The divide modes use e = exp(-|t|), which never overflows:
	// N/(1+e^t) = N/(1+e) for t ≤ 0 and N·e/(1+e) for t > 0.
	VMOVAPS      Y1, Y11
	VBROADCASTSS signbit<>(SB), Y2
	VORPS        Y2, Y1, Y1

clamp:
	// Clamp (NaN lanes are restored at the end). Below -104, e^t is 0 in
	// float32 even after any scaling: remember those lanes (Y9) and zero
	// them at the end, since the clamped value is not 0 and N·e could
	// bring it back into range (silu(-1e30) must be -0).
	VBROADCASTSS lo<>(SB), Y2
	VCMPPS       $1, Y2, Y1, Y9 // zero: t < -104
	VMAXPS       Y2, Y1, Y1     // t ≥ -104
	VBROADCASTSS hi<>(SB), Y3
	VCMPPS       $14, Y3, Y1, Y12 // big: t > 88.7228
	VMINPS       Y3, Y1, Y1

	// Subnormal range: t < -80 → t + 64·ln2, scale 2^-64 afterwards.
	VBROADCASTSS small<>(SB), Y2
	VCMPPS       $1, Y2, Y1, Y13  // small: t < -80
	VBROADCASTSS shift<>(SB), Y2
	VANDPS       Y13, Y2, Y2
	VADDPS       Y2, Y1, Y1

	// k = round(t·log2 e), r = t - k·ln2 (two-part ln2)
	VMULPS       Y15, Y1, Y4
	VROUNDPS     $0, Y4, Y4     // kf
	VBROADCASTSS ln2hi<>(SB), Y2
	VFNMADD231PS Y4, Y2, Y1     // r = t - kf·ln2hi
	VBROADCASTSS ln2lo<>(SB), Y2
	VFNMADD231PS Y4, Y2, Y1     // r -= kf·ln2lo

	// p = 1 + r(1 + r(1/2 + r(1/6 + r(1/24 + r(1/120 + r(1/720 + r/5040))))))
	VBROADCASTSS c7<>(SB), Y5
	VBROADCASTSS c6<>(SB), Y2
	VFMADD213PS  Y2, Y1, Y5
	VBROADCASTSS c5<>(SB), Y2
	VFMADD213PS  Y2, Y1, Y5
	VBROADCASTSS c4<>(SB), Y2
	VFMADD213PS  Y2, Y1, Y5
	VBROADCASTSS c3<>(SB), Y2
	VFMADD213PS  Y2, Y1, Y5
	VBROADCASTSS c2<>(SB), Y2
	VFMADD213PS  Y2, Y1, Y5
	VFMADD213PS  Y14, Y1, Y5
	VFMADD213PS  Y14, Y1, Y5

	// e = p·2^k
	VCVTPS2DQ Y4, Y6
	VPSLLD    $23, Y6, Y6
	VPADDD    Y6, Y5, Y5

	// scale the subnormal range, saturate the big one
	VBROADCASTSS tiny<>(SB), Y2
	VBLENDVPS    Y13, Y2, Y14, Y3 // scale: small ? 2^-64 : 1 (kept for the numerator)
	VMOVAPS      Y5, Y10          // unscaled e
	VANDNPS      Y10, Y9, Y10     // e^t underflowed: 0
	VANDNPS      Y5, Y9, Y5
	VMULPS       Y3, Y5, Y5
	VBROADCASTSS inf<>(SB), Y2
	VBLENDVPS    Y12, Y2, Y5, Y5

	// result by mode
	CMPQ DX, $0
	JEQ  store
	VMOVAPS Y0, Y7            // N = x (silu, gelu)
	CMPQ    DX, $1
	JNE     haveN
	VMOVAPS Y14, Y7           // N = 1 (sigmoid)

haveN:
	VXORPS    Y2, Y2, Y2
	VCMPPS    $14, Y2, Y11, Y8 // t > 0
	VMULPS    Y10, Y7, Y9      // N·e, scaled once at the end so a tiny e
	VMULPS    Y3, Y9, Y9       // loses no precision before the multiply
	VBLENDVPS Y8, Y9, Y7, Y7   // numerator
	VADDPS    Y14, Y5, Y5      // 1 + e
	VDIVPS    Y5, Y7, Y5
	CMPQ      DX, $1
	JEQ       store
	// silu and gelu of -Inf are NaN, as the formula x/(1+e^-x) gives
	// (-Inf/Inf); the GPU kernels and the scalar path compute it so.
	VBROADCASTSS neginf<>(SB), Y2
	VCMPPS       $0, Y2, Y0, Y8
	VBROADCASTSS qnan<>(SB), Y2
	VBLENDVPS    Y8, Y2, Y5, Y5

store:
	VCMPPS    $3, Y0, Y0, Y2  // NaN lanes of x
	VBLENDVPS Y2, Y0, Y5, Y5
	VMOVUPS   Y5, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop

done:
	VZEROUPPER
	RET

DATA log2e<>+0(SB)/4, $1.44269504088896341
GLOBL log2e<>(SB), RODATA|NOPTR, $4
DATA one<>+0(SB)/4, $1.0
GLOBL one<>(SB), RODATA|NOPTR, $4
DATA negone<>+0(SB)/4, $-1.0
GLOBL negone<>(SB), RODATA|NOPTR, $4
DATA gelua<>+0(SB)/4, $0.044715
GLOBL gelua<>(SB), RODATA|NOPTR, $4
DATA neg2c<>+0(SB)/4, $-1.5957691216057308
GLOBL neg2c<>(SB), RODATA|NOPTR, $4
DATA lo<>+0(SB)/4, $-104.0
GLOBL lo<>(SB), RODATA|NOPTR, $4
DATA hi<>+0(SB)/4, $88.72283
GLOBL hi<>(SB), RODATA|NOPTR, $4
DATA small<>+0(SB)/4, $-80.0
GLOBL small<>(SB), RODATA|NOPTR, $4
DATA shift<>+0(SB)/4, $44.3614195558365
GLOBL shift<>(SB), RODATA|NOPTR, $4
DATA ln2hi<>+0(SB)/4, $0.693359375
GLOBL ln2hi<>(SB), RODATA|NOPTR, $4
DATA ln2lo<>+0(SB)/4, $-2.12194440e-4
GLOBL ln2lo<>(SB), RODATA|NOPTR, $4
DATA c7<>+0(SB)/4, $1.98412698412698413e-4
GLOBL c7<>(SB), RODATA|NOPTR, $4
DATA c6<>+0(SB)/4, $1.38888888888888889e-3
GLOBL c6<>(SB), RODATA|NOPTR, $4
DATA c5<>+0(SB)/4, $8.33333333333333333e-3
GLOBL c5<>(SB), RODATA|NOPTR, $4
DATA c4<>+0(SB)/4, $4.16666666666666667e-2
GLOBL c4<>(SB), RODATA|NOPTR, $4
DATA c3<>+0(SB)/4, $1.66666666666666667e-1
GLOBL c3<>(SB), RODATA|NOPTR, $4
DATA c2<>+0(SB)/4, $0.5
GLOBL c2<>(SB), RODATA|NOPTR, $4
DATA tiny<>+0(SB)/4, $5.421010862427522e-20
GLOBL tiny<>(SB), RODATA|NOPTR, $4
DATA neginf<>+0(SB)/4, $0xff800000
GLOBL neginf<>(SB), RODATA|NOPTR, $4
DATA qnan<>+0(SB)/4, $0x7fc00000
GLOBL qnan<>(SB), RODATA|NOPTR, $4
DATA signbit<>+0(SB)/4, $0x80000000
GLOBL signbit<>(SB), RODATA|NOPTR, $4
DATA inf<>+0(SB)/4, $0x7f800000
GLOBL inf<>(SB), RODATA|NOPTR, $4
