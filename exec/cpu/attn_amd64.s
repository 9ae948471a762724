#include "textflag.h"

// Attention's two inner loops for four query heads of a group at once, in
// float64 from float32 operands (exec/cpu/attention.go, attentionRows):
// four lanes of d a step (VCVTPS2PD), FMA. n is a multiple of 4; the
// caller does the rest.

// func dot4F64(q0, q1, q2, q3, k *float32, n int, out *[4]float64)
//
// out[i] = Σ_d q_i[d]·k[d], each as four partial sums over d mod 4 added
// at the end.
TEXT ·dot4F64(SB), NOSPLIT, $0-56
	MOVQ   q0+0(FP), R8
	MOVQ   q1+8(FP), R9
	MOVQ   q2+16(FP), R10
	MOVQ   q3+24(FP), R11
	MOVQ   k+32(FP), SI
	MOVQ   n+40(FP), CX
	MOVQ   out+48(FP), DI
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	XORQ   AX, AX
	SHRQ   $2, CX
	JZ     dotfold

dotloop:
	VCVTPS2PD   (SI)(AX*4), Y4
	VCVTPS2PD   (R8)(AX*4), Y5
	VFMADD231PD Y4, Y5, Y0
	VCVTPS2PD   (R9)(AX*4), Y6
	VFMADD231PD Y4, Y6, Y1
	VCVTPS2PD   (R10)(AX*4), Y7
	VFMADD231PD Y4, Y7, Y2
	VCVTPS2PD   (R11)(AX*4), Y8
	VFMADD231PD Y4, Y8, Y3
	ADDQ        $4, AX
	DECQ        CX
	JNZ         dotloop

dotfold:
	// Y0…Y3 → (Σ Y0, Σ Y1, Σ Y2, Σ Y3)
	VHADDPD      Y1, Y0, Y0 // (a0+a1, b0+b1, a2+a3, b2+b3)
	VHADDPD      Y3, Y2, Y2 // (c0+c1, d0+d1, c2+c3, d2+d3)
	VPERM2F128   $0x20, Y2, Y0, Y4 // (a01, b01, c01, d01)
	VPERM2F128   $0x31, Y2, Y0, Y5 // (a23, b23, c23, d23)
	VADDPD       Y5, Y4, Y4
	VMOVUPD      Y4, (DI)
	VZEROUPPER
	RET

// func axpy4F64(a0, a1, a2, a3 *float64, p *[4]float64, v *float32, n int)
//
// a_i[d] += p[i]·v[d] for d < n.
TEXT ·axpy4F64(SB), NOSPLIT, $0-56
	MOVQ         a0+0(FP), R8
	MOVQ         a1+8(FP), R9
	MOVQ         a2+16(FP), R10
	MOVQ         a3+24(FP), R11
	MOVQ         p+32(FP), DX
	MOVQ         v+40(FP), SI
	MOVQ         n+48(FP), CX
	VBROADCASTSD (DX), Y0
	VBROADCASTSD 8(DX), Y1
	VBROADCASTSD 16(DX), Y2
	VBROADCASTSD 24(DX), Y3
	XORQ         AX, AX
	SHRQ         $2, CX
	JZ           axpydone

axpyloop:
	VCVTPS2PD   (SI)(AX*4), Y4
	VMOVUPD     (R8)(AX*8), Y5
	VFMADD231PD Y4, Y0, Y5
	VMOVUPD     Y5, (R8)(AX*8)
	VMOVUPD     (R9)(AX*8), Y6
	VFMADD231PD Y4, Y1, Y6
	VMOVUPD     Y6, (R9)(AX*8)
	VMOVUPD     (R10)(AX*8), Y7
	VFMADD231PD Y4, Y2, Y7
	VMOVUPD     Y7, (R10)(AX*8)
	VMOVUPD     (R11)(AX*8), Y8
	VFMADD231PD Y4, Y3, Y8
	VMOVUPD     Y8, (R11)(AX*8)
	ADDQ        $4, AX
	DECQ        CX
	JNZ         axpyloop

axpydone:
	VZEROUPPER
	RET
