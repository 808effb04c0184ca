#include "textflag.h"

// The activation pattern (actPattern: word w is hi ^ lo of the 64-bit
// product (w+seed)·K) and the poison fill, 8 words per iteration with
// AVX2. The products advance by adding 8K, so no multiply is needed: Y0
// holds the products of the even words of a group of 8, Y1 those of the
// odd words; the caller passes their first values (init[0:4], init[4:8])
// and 8K.

// PATTERN leaves the 8 pattern words of the group in Y2.
#define PATTERN \
	VPSRLQ $32, Y0, Y2; \
	VPXOR Y0, Y2, Y2; \
	VPSLLQ $32, Y1, Y3; \
	VPXOR Y1, Y3, Y3; \
	VPBLENDD $0xAA, Y3, Y2, Y2; \
	VPADDQ Y4, Y0, Y0; \
	VPADDQ Y4, Y1, Y1

// func fillPatternAVX2(dst *uint32, n int, init *[8]uint64, step uint64)
TEXT ·fillPatternAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ n+8(FP), CX
	MOVQ init+16(FP), SI
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VPBROADCASTQ step+24(FP), Y4
	SHRQ $3, CX
	JZ filldone

fillloop:
	PATTERN
	VMOVDQU Y2, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ fillloop

filldone:
	VZEROUPPER
	RET

// func checkPatternAVX2(src *uint32, n int, init *[8]uint64, step uint64) int
// The index of the first group of 8 words that differs from the pattern,
// or n.
TEXT ·checkPatternAVX2(SB), NOSPLIT, $0-40
	MOVQ src+0(FP), DI
	MOVQ n+8(FP), CX
	MOVQ init+16(FP), SI
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VPBROADCASTQ step+24(FP), Y4
	XORQ BX, BX
	SHRQ $3, CX
	JZ checkdone

checkloop:
	PATTERN
	VPCMPEQD (DI), Y2, Y5
	VPMOVMSKB Y5, AX
	CMPL AX, $0xffffffff
	JNE checkfound
	ADDQ $32, DI
	ADDQ $8, BX
	DECQ CX
	JNZ checkloop

checkdone:
	MOVQ n+8(FP), BX

checkfound:
	VZEROUPPER
	MOVQ BX, ret+32(FP)
	RET

// func fillOnesAVX2(dst *byte, n int)
// n (a multiple of 128) bytes of 0xff.
TEXT ·fillOnesAVX2(SB), NOSPLIT, $0-16
	MOVQ dst+0(FP), DI
	MOVQ n+8(FP), CX
	VPCMPEQD Y0, Y0, Y0
	SHRQ $7, CX
	JZ onesdone

onesloop:
	VMOVDQU Y0, (DI)
	VMOVDQU Y0, 32(DI)
	VMOVDQU Y0, 64(DI)
	VMOVDQU Y0, 96(DI)
	ADDQ $128, DI
	DECQ CX
	JNZ onesloop

onesdone:
	VZEROUPPER
	RET
