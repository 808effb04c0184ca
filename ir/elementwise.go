package ir

// The memory-bound kernels around the matmuls, as HBM bytes per element of
// the tensor they run over (b is the activation element size). Eager
// PyTorch runs each operation as its own kernel, reading and writing the
// whole tensor; torch.compile (Inductor) fuses a chain of them into one
// kernel that reads its inputs once and writes its output once. The eager
// counts follow torchtitan's Llama code; docs/cost-model.md lists the
// kernels behind each figure.

// normPasses is an RMSNorm with the residual add before it. Eager:
// the add (read 2b, write b), x.float() (b, 4), x.pow(2).mean (4, 4),
// rsqrt and x·rsqrt (4+4, 4), .type_as(x) (4, b), ·weight (b, b).
// Compiled: read the two addends, write the sum and the normed output.
func normPasses(b int64, compile bool) int64 {
	if compile {
		return 4 * b
	}
	return 3*b + (b + 4) + 8 + 12 + (4 + b) + 2*b
}

// normAddPasses is the residual add's part of normPasses: eager, its own
// kernel (read 2b, write b); compiled, the second addend's read and the
// sum's write the fused kernel makes beside the norm's read and write.
// The add belongs to what comes before the norm: the block's input is the
// previous block's last sum, so a checkpoint region that starts at its
// norm recomputes the norm without it (ir/cost.go).
func normAddPasses(b int64, compile bool) int64 {
	if compile {
		return 2 * b
	}
	return 3 * b
}

// plainNormPasses is an RMSNorm with no residual add before it: the
// norms inside an attention, over q and k (qk_norm) or over MLA's
// latents, normalise a projection's output, which nothing adds to.
func plainNormPasses(b int64, compile bool) int64 {
	return normPasses(b, compile) - normAddPasses(b, compile)
}

// activationPasses is a gated activation over the hidden width (SwiGLU:
// silu(gate) read b write b; silu·up read 2b write b) or an ungated one
// (read b, write b). Compiled: one kernel reading its inputs and writing
// the product.
func activationPasses(act string, b int64, compile bool) int64 {
	if isGated(act) {
		if compile {
			return 3 * b
		}
		return 5 * b
	}
	return 2 * b
}

// ropePasses is rotary embedding on q and k: eager, as torchtitan writes
// it, view_as_complex of the float upcast (read b, write 4), the complex
// multiply (read 4 and the table, write 4), view_as_real and type_as (read
// 4, write b); Hugging Face's rotate_half moves as much in bf16 over more
// kernels. Fused by torch.compile: read b, write b. Inductor fuses real
// arithmetic only: it generates no code for complex operators
// ("Torchinductor does not support code generation for complex
// operators", torch/_inductor/lowering.py, unsupported_input_tensor) and
// runs aten's kernel for the complex multiply, whose fp32 input and output
// must then be in memory, so torchtitan's complex form (the attention's
// rope = "complex") moves the eager bytes compiled too.
//
// Backward moves as much again, not twice forward's (satMul2): the
// rotation's table is a buffer that needs no gradient, and autograd
// computes only the gradients an input needs, so the complex multiply's
// backward is one complex multiply of the output gradient by the
// conjugated table (derivatives.yaml, mul.Tensor: self's gradient is
// mul_tensor_backward(grad, other), grad · other.conj()) and reads no
// saved input; the casts' and views' backwards are a cast back and views
// (read 4, write b; read b, write 4). Fused, the real form's backward is
// one kernel too, reading the output gradient and the tables and writing
// the input gradient: read b, write b. Eager rotate_half's backward runs
// more kernels than its forward (the slices' backward fills zeros, the two
// products' gradients are summed), so it keeps twice forward's.
func ropePasses(b int64, fused bool) int64 {
	if fused {
		return 2 * b
	}
	return 2*b + 16
}

// matrixRoPEPasses is rotary embedding as ibm-fms writes it, and so
// fms-fsdp trains it (RotaryEmbedding.adjusted_qk, fms/modules/positions.py
// at 6440fee8 and 1cb412df, 2024-03 to 05): each (even, odd) pair times a
// 2 × 2 rotation from the table, by broadcasting. Eager: the fp32 upcast
// (read b, write 4), the table times the pair broadcast to both rows
// (read 4 and the table, write 8: two fp32 products per element), the sum
// over the pair (read 8, write 4), type_as (read 4, write b). Backward
// runs one kernel per step too, in reverse: the output gradient's upcast
// (read b, write 4), its product with the table, which needs no gradient
// (read 4, write 8), the sum back to each pair (read 8, write 4) and the
// cast (read 4, write b), as much as forward. Real arithmetic, so
// torch.compile fuses it like ropePasses' real form: read b, write b.
func matrixRoPEPasses(b int64, fused bool) int64 {
	if fused {
		return 2 * b
	}
	return 2*b + 32
}

// satMul2 doubles a byte count, saturating: backward's element-wise
// kernels read the saved input and the output gradient and write the input
// gradient, twice forward's traffic.
func satMul2(x int64) int64 { return satAdd(x, x) }
