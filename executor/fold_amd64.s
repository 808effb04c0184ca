#include "textflag.h"

// AVX2 and F16C folds of one input row into the float32 accumulators of a
// host reduction, 16 bf16s or 8 fp16s or fp32s per iteration (the caller
// folds any tail in Go). Each computes what fastpath.go's Go loops
// compute, with the same float32 operations and roundings
// (TestFoldAVX2MatchesGo): VADDPS and VMULPS are IEEE float32 operations
// rounded to nearest even (Go leaves MXCSR at its default: no
// flush-to-zero, no denormals-are-zero), bf16 rounding is rbf16's integer
// sequence, and fp16 rounding goes through VCVTPS2PH with rounding mode 0
// (nearest even), which is exact IEEE conversion, subnormals included.
//
// Modes (fastpath.go's foldAdd, foldAddPremul, foldFirst,
// foldFirstPremul): 0 add, 1 add after premultiplying by s, 2 first row
// (copy), 3 first row premultiplied. Every function returns 1 if any element of the
// row is all ones (the poison pattern), else 0.

// bcast32 broadcasts a 32-bit constant into every lane of y.
#define BCAST32(c, y) \
	MOVL $c, AX; \
	MOVD AX, X0; \
	VPBROADCASTD X0, y

// RBF16 rounds the float32s in v to bf16 in place: rbf16's add of 0x7fff
// plus the lowest kept bit, then clearing the low half. rbf16 leaves NaNs
// alone; here none needs it: every NaN a bf16 fold holds has a zero low
// half (a widened bf16, x86's quieted copy of such an operand, or the
// default NaN 0xffc00000), and the rounding leaves such a value as it is.
// Needs Y14 = 1, Y13 = 0x7fff, Y12 = 0xffff0000.
#define RBF16(v, t1) \
	VPSRLD $16, v, t1; \
	VPAND Y14, t1, t1; \
	VPADDD Y13, t1, t1; \
	VPADDD v, t1, v; \
	VPAND Y12, v, v

// LOADBF16 widens 16 bf16s at (SI) into lo and hi and ORs a poison mask
// into Y9 (Y8 = all ones, Y7 = zero). Interleaving each bf16 above a zero
// word is the widening (the bf16 becomes the high half of its float32);
// the interleave works within 128-bit lanes, so lo holds elements 0-3 and
// 8-11, hi 4-7 and 12-15. The accumulators keep that order (each element
// is folded where it is, whatever its place), and storeBF16AVX2's pack
// undoes it.
#define LOADBF16(lo, hi, t) \
	VMOVDQU (SI), t; \
	VPCMPEQW Y8, t, Y2; \
	VPOR Y2, Y9, Y9; \
	VPUNPCKLWD t, Y7, lo; \
	VPUNPCKHWD t, Y7, hi

// SKIPEXACT jumps to label when every float32 in a and b has a zero low
// half: rounding them to bf16 would leave them as they are. A product of
// a bf16 by a power of two (avg over 2^k ranks) is such a value unless it
// is a float32 subnormal, so the premultiplied folds mostly skip that
// rounding. Needs Y11 = 0x0000ffff.
#define SKIPEXACT(a, b, label) \
	VPOR a, b, Y6; \
	VPTEST Y11, Y6; \
	JZ label

// func foldBF16AVX2(acc *float32, x *uint16, n int, s float32, mode int) int
// n is a multiple of 16.
TEXT ·foldBF16AVX2(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ mode+32(FP), DX
	VBROADCASTSS s+24(FP), Y15
	BCAST32(1, Y14)
	BCAST32(0x7fff, Y13)
	BCAST32(0xffff0000, Y12)
	BCAST32(0x0000ffff, Y11)
	VPCMPEQD Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y7, Y7, Y7
	SHRQ $4, CX
	JZ bf16done
	CMPQ DX, $1
	JEQ bf16premul
	CMPQ DX, $2
	JEQ bf16first
	CMPQ DX, $3
	JEQ bf16firstpremul

bf16add:
	LOADBF16(Y0, Y5, Y1)
	VADDPS (DI), Y0, Y0 // x + acc: x's NaN wins, as the Go loop compiles
	VADDPS 32(DI), Y5, Y5
	RBF16(Y0, Y1)
	RBF16(Y5, Y6)
	VMOVUPS Y0, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ bf16add
	JMP bf16done

bf16premul:
	LOADBF16(Y0, Y5, Y1)
	VMULPS Y15, Y0, Y0
	VMULPS Y15, Y5, Y5
	SKIPEXACT(Y0, Y5, bf16premulexact)
	RBF16(Y0, Y1)
	RBF16(Y5, Y6)

bf16premulexact:
	VADDPS (DI), Y0, Y0
	VADDPS 32(DI), Y5, Y5
	RBF16(Y0, Y1)
	RBF16(Y5, Y6)
	VMOVUPS Y0, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ bf16premul
	JMP bf16done

bf16first:
	LOADBF16(Y0, Y5, Y1)
	VMOVUPS Y0, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ bf16first
	JMP bf16done

bf16firstpremul:
	LOADBF16(Y0, Y5, Y1)
	VMULPS Y15, Y0, Y0
	VMULPS Y15, Y5, Y5
	SKIPEXACT(Y0, Y5, bf16firstpremulexact)
	RBF16(Y0, Y1)
	RBF16(Y5, Y6)

bf16firstpremulexact:
	VMOVUPS Y0, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ bf16firstpremul

bf16done:
	XORQ AX, AX
	VPTEST Y9, Y9
	SETNE AL
	VZEROUPPER
	MOVQ AX, ret+40(FP)
	RET

// LOADFP16 widens 8 fp16s at (SI) into v (exactly) and ORs a poison mask
// into Y9.
#define LOADFP16(v, t) \
	VMOVDQU (SI), X1; \
	VPCMPEQW X8, X1, t; \
	VPOR t, X9, X9; \
	VCVTPH2PS X1, v

// RFP16 rounds the float32s in v to fp16 values, staying float32.
#define RFP16(v) \
	VCVTPS2PH $0, v, X7; \
	VCVTPH2PS X7, v

// func foldFP16AVX2(acc *float32, x *uint16, n int, s float32, mode int) int
TEXT ·foldFP16AVX2(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ mode+32(FP), DX
	VBROADCASTSS s+24(FP), Y15
	VPCMPEQD Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	SHRQ $3, CX
	JZ fp16done
	CMPQ DX, $1
	JEQ fp16premul
	CMPQ DX, $2
	JEQ fp16first
	CMPQ DX, $3
	JEQ fp16firstpremul

fp16add:
	LOADFP16(Y0, X2)
	VMOVUPS (DI), Y3
	VADDPS Y0, Y3, Y0
	RFP16(Y0)
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ fp16add
	JMP fp16done

fp16premul:
	LOADFP16(Y0, X2)
	VMULPS Y15, Y0, Y0
	RFP16(Y0)
	VMOVUPS (DI), Y3
	VADDPS Y0, Y3, Y0
	RFP16(Y0)
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ fp16premul
	JMP fp16done

fp16first:
	LOADFP16(Y0, X2)
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ fp16first
	JMP fp16done

fp16firstpremul:
	LOADFP16(Y0, X2)
	VMULPS Y15, Y0, Y0
	RFP16(Y0)
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ fp16firstpremul

fp16done:
	XORQ AX, AX
	VPTEST Y9, Y9
	SETNE AL
	VZEROUPPER
	MOVQ AX, ret+40(FP)
	RET

// LOADFP32 loads 8 float32s at (SI) into v and ORs a poison mask into Y9.
#define LOADFP32(v, t) \
	VMOVUPS (SI), v; \
	VPCMPEQD Y8, v, t; \
	VPOR t, Y9, Y9

// func foldFP32AVX2(acc *float32, x *float32, n int, s float32, mode int) int
TEXT ·foldFP32AVX2(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ mode+32(FP), DX
	VBROADCASTSS s+24(FP), Y15
	VPCMPEQD Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	SHRQ $3, CX
	JZ fp32done
	CMPQ DX, $1
	JEQ fp32premul
	CMPQ DX, $2
	JEQ fp32first
	CMPQ DX, $3
	JEQ fp32firstpremul

fp32add:
	LOADFP32(Y0, Y2)
	VMOVUPS (DI), Y3
	VADDPS Y0, Y3, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ fp32add
	JMP fp32done

fp32premul:
	LOADFP32(Y0, Y2)
	VMULPS Y15, Y0, Y0
	VMOVUPS (DI), Y3
	VADDPS Y0, Y3, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ fp32premul
	JMP fp32done

fp32first:
	LOADFP32(Y0, Y2)
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ fp32first
	JMP fp32done

fp32firstpremul:
	LOADFP32(Y0, Y2)
	VMULPS Y15, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ fp32firstpremul

fp32done:
	XORQ AX, AX
	VPTEST Y9, Y9
	SETNE AL
	VZEROUPPER
	MOVQ AX, ret+40(FP)
	RET

// func cpuid(leaf, sub uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET

// func xgetbv0() uint32
TEXT ·xgetbv0(SB), NOSPLIT, $0-4
	MOVL $0, CX
	XGETBV
	MOVL AX, ret+0(FP)
	RET

// func storeBF16AVX2(out *uint16, acc *float32, n int)
// The high halves of n (a multiple of 16) float32s already rounded to
// bf16, in foldBF16AVX2's order: packing its two vectors within lanes puts
// the elements back in place.
TEXT ·storeBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ acc+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ sbf16done

sbf16loop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VPSRLD $16, Y0, Y0
	VPSRLD $16, Y1, Y1
	VPACKUSDW Y1, Y0, Y0
	VMOVDQU Y0, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JNZ sbf16loop

sbf16done:
	VZEROUPPER
	RET

// func storeFP16AVX2(out *uint16, acc *float32, n int)
// n (a multiple of 8) float32s converted to fp16, to nearest even.
TEXT ·storeFP16AVX2(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ acc+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ sfp16done

sfp16loop:
	VMOVUPS (SI), Y0
	VCVTPS2PH $0, Y0, X0
	VMOVDQU X0, (DI)
	ADDQ $32, SI
	ADDQ $16, DI
	DECQ CX
	JNZ sfp16loop

sfp16done:
	VZEROUPPER
	RET
