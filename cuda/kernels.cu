// Kernels of fsdpc's CUDA backend: what the FSDP schedule needs besides
// copies and NCCL. The exact arithmetic of each is specified on
// gpu.Device (executor/gpu/device.go) and recomputed on the host by the
// backend's data check, so every result must be bit-exact:
//
//   - dtype conversions are integer bit manipulation written from the
//     same definitions as executor/numerics.go, not cuda_fp16.h or
//     cuda_bf16.h intrinsics, whose NaN handling differs;
//   - the PTX is built with --fmad=false, so a*b+c is a rounded product
//     and a rounded sum, as in Go;
//   - fp64 <-> fp32 conversions of NaNs keep the payload the way amd64's
//     and arm64's converting instructions do (quieted, top bits kept),
//     since the host converts with those.
//
// Regenerate kernels.ptx with `go generate ./cuda` (see kernelspec.go);
// TestPTXUpToDate fails when the two differ.
//
// Every kernel parameter is 8 bytes wide (pointers, long long, double)
// except reduce's pointer array: gorgonia.org/cu's Launch copies 8 bytes
// per parameter. Element loops are grid-stride with 64-bit indices.

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;
typedef unsigned short u16;

// Dtype codes: ir.DType's values. TestDTypeCodes reads these lines.
enum {
	DT_F64 = 1,
	DT_F32 = 2,
	DT_BF16 = 3,
	DT_F16 = 4,
};

// MAX_SRCS bounds reduce's inputs: the pointers travel by value in the
// kernel's parameter block (512 bytes of the 4 KiB CUDA allows), so a
// launch needs no device-side argument buffer, which would have to stay
// alive until the kernel ran and would not survive graph capture.
#define MAX_SRCS 64

// --- conversions -----------------------------------------------------------

__device__ __forceinline__ float f32_from_bf16(u16 h) { return __uint_as_float((u32)h << 16); }

// bf16_from_f32 rounds to nearest, ties to even; NaNs stay NaN (quietened),
// overflow rounds to infinity. As bf16FromF32 in executor/numerics.go.
__device__ __forceinline__ u16 bf16_from_f32(float f) {
	u32 b = __float_as_uint(f);
	if ((b & 0x7fffffffu) > 0x7f800000u) {
		return (u16)((b >> 16) | 0x0040u);
	}
	b += 0x7fffu + ((b >> 16) & 1u);
	return (u16)(b >> 16);
}

// f32_from_f16 widens IEEE binary16 exactly. As f32FromFP16.
__device__ __forceinline__ float f32_from_f16(u16 h) {
	u32 sign = (u32)(h & 0x8000u) << 16;
	u32 exp = ((u32)h >> 10) & 0x1fu;
	u32 man = (u32)h & 0x3ffu;
	if (exp == 0x1fu) {
		return __uint_as_float(sign | 0x7f800000u | (man << 13));
	}
	if (exp == 0) {
		float v = (float)man * (1.0f / 16777216.0f); // exact: man < 2^10
		return sign ? -v : v;
	}
	return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
}

// f16_from_f32 rounds to nearest, ties to even, with subnormals and
// overflow to infinity. As fp16FromF32.
__device__ __forceinline__ u16 f16_from_f32(float f) {
	u32 b = __float_as_uint(f);
	u16 sign = (u16)((b >> 16) & 0x8000u);
	int exp = (int)((b >> 23) & 0xffu);
	u32 man = b & 0x7fffffu;
	if (exp == 0xff) {
		if (man != 0) {
			return sign | 0x7e00u | (u16)(man >> 13);
		}
		return sign | 0x7c00u;
	}
	int e = exp - 127;
	if (e > 15) {
		return sign | 0x7c00u;
	}
	if (e >= -14) {
		u32 h = ((u32)(e + 15) << 10) | (man >> 13);
		u32 rest = man & 0x1fffu;
		if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) == 1u)) {
			h++; // a carry into the exponent is right, up to infinity
		}
		return sign | (u16)h;
	}
	if (exp == 0) {
		return sign; // float32 subnormals are far below fp16's smallest
	}
	// A subnormal result: m * 2^-24 with m = full * 2^(e+1).
	u32 full = man | 0x800000u;
	u32 s = (u32)(-(e + 1));
	if (s > 31) {
		return sign;
	}
	u32 m = full >> s;
	u32 rest = full & ((1u << s) - 1u);
	u32 half = 1u << (s - 1);
	if (rest > half || (rest == half && (m & 1u) == 1u)) {
		m++;
	}
	return sign | (u16)m;
}

// f32_from_f64 rounds to nearest even (cvt.rn, subnormals kept); a NaN
// keeps its sign and the top 22 payload bits and is quietened, as amd64's
// CVTSD2SS and arm64's FCVT do, where the device's cvt would return the
// canonical NaN.
__device__ __forceinline__ float f32_from_f64(double d) {
	u64 b = (u64)__double_as_longlong(d);
	if ((b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) {
		return __uint_as_float(((u32)(b >> 32) & 0x80000000u) | 0x7fc00000u | (u32)((b >> 29) & 0x3fffffu));
	}
	return __double2float_rn(d);
}

// f64_from_f32 widens exactly; NaNs as CVTSS2SD does (see f32_from_f64).
__device__ __forceinline__ double f64_from_f32(float f) {
	u32 b = __float_as_uint(f);
	if ((b & 0x7fffffffu) > 0x7f800000u) {
		u64 r = ((u64)(b & 0x80000000u) << 32) | 0x7ff8000000000000ull | ((u64)(b & 0x7fffffu) << 29);
		return __longlong_as_double((i64)r);
	}
	return (double)f;
}

// --- element access --------------------------------------------------------

// Raw little-endian accesses at any byte address: a group's parameters
// follow each other without padding, so an fp32 array may start at an odd
// address, and a misaligned typed access would fault. Element i of an
// array is aligned exactly when the array is, so the branch goes the same
// way for every thread; the aligned case is one access.
__device__ __forceinline__ u16 ld16(const void* base, i64 i) {
	const unsigned char* p = (const unsigned char*)base + 2 * i;
	if (((u64)p & 1) == 0) {
		return *(const u16*)p;
	}
	return (u16)(p[0] | (p[1] << 8));
}

__device__ __forceinline__ u32 ld32(const void* base, i64 i) {
	const unsigned char* p = (const unsigned char*)base + 4 * i;
	if (((u64)p & 3) == 0) {
		return *(const u32*)p;
	}
	return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

__device__ __forceinline__ u64 ld64(const void* base, i64 i) {
	const unsigned char* p = (const unsigned char*)base + 8 * i;
	if (((u64)p & 7) == 0) {
		return *(const u64*)p;
	}
	u64 v = 0;
	for (int k = 7; k >= 0; k--) {
		v = (v << 8) | p[k];
	}
	return v;
}

__device__ __forceinline__ void st16(void* base, i64 i, u16 v) {
	unsigned char* p = (unsigned char*)base + 2 * i;
	if (((u64)p & 1) == 0) {
		*(u16*)p = v;
		return;
	}
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

__device__ __forceinline__ void st32(void* base, i64 i, u32 v) {
	unsigned char* p = (unsigned char*)base + 4 * i;
	if (((u64)p & 3) == 0) {
		*(u32*)p = v;
		return;
	}
	for (int k = 0; k < 4; k++) {
		p[k] = (unsigned char)(v >> (8 * k));
	}
}

__device__ __forceinline__ void st64(void* base, i64 i, u64 v) {
	unsigned char* p = (unsigned char*)base + 8 * i;
	if (((u64)p & 7) == 0) {
		*(u64*)p = v;
		return;
	}
	for (int k = 0; k < 8; k++) {
		p[k] = (unsigned char)(v >> (8 * k));
	}
}

__device__ __forceinline__ double ldf64(const void* p, i64 i) { return __longlong_as_double((i64)ld64(p, i)); }
__device__ __forceinline__ void stf64(void* p, i64 i, double v) { st64(p, i, (u64)__double_as_longlong(v)); }

// load32 reads element i as float32, the op math of every dtype but fp64
// (fp64 is rounded, as the host's float32(v) does).
__device__ __forceinline__ float load32(const void* p, i64 i, int dt) {
	switch (dt) {
	case DT_F32:
		return __uint_as_float(ld32(p, i));
	case DT_BF16:
		return f32_from_bf16(ld16(p, i));
	case DT_F16:
		return f32_from_f16(ld16(p, i));
	default:
		return f32_from_f64(ldf64(p, i));
	}
}

// quiet32 sets a NaN's quiet bit: the host's float32 values pass through
// float64, whose conversions quieten signalling NaNs.
__device__ __forceinline__ u32 quiet32(u32 b) {
	return (b & 0x7fffffffu) > 0x7f800000u ? b | 0x400000u : b;
}

// store32 rounds a float32 to dt and writes it as element i.
__device__ __forceinline__ void store32(void* p, i64 i, int dt, float v) {
	switch (dt) {
	case DT_F32:
		st32(p, i, quiet32(__float_as_uint(v)));
		break;
	case DT_BF16:
		st16(p, i, bf16_from_f32(v));
		break;
	case DT_F16:
		st16(p, i, f16_from_f32(v));
		break;
	default:
		stf64(p, i, f64_from_f32(v));
		break;
	}
}

__device__ __forceinline__ double load64(const void* p, i64 i, int dt) {
	if (dt == DT_F64) {
		return ldf64(p, i);
	}
	return f64_from_f32(load32(p, i, dt));
}

// store64 writes a float64 as element i of dt; narrower dtypes round
// through float32 first, as the host's store does.
__device__ __forceinline__ void store64(void* p, i64 i, int dt, double v) {
	if (dt == DT_F64) {
		stf64(p, i, v);
		return;
	}
	store32(p, i, dt, f32_from_f64(v));
}

#define GRID_STRIDE(i, n) \
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// --- elementwise kernels ---------------------------------------------------

// cast converts n elements of src (dtype st) into dst (dtype dt). A
// narrowing from fp64 rounds through float32, as the host does.
extern "C" __global__ void cast(void* dst, i64 dt, const void* src, i64 st, i64 n) {
	if (dt == DT_F64) {
		GRID_STRIDE(i, n) { store64(dst, i, DT_F64, load64(src, i, (int)st)); }
		return;
	}
	GRID_STRIDE(i, n) { store32(dst, i, (int)dt, load32(src, i, (int)st)); }
}

struct Srcs {
	const void* p[MAX_SRCS];
};

// reduce_elem is element i of reduce's result in float32 arithmetic.
__device__ __forceinline__ void reduce_elem(void* dst, const Srcs& srcs, i64 nsrc, i64 i, int dt, float s) {
	float acc = 0.0f;
	for (i64 j = 0; j < nsrc; j++) {
		acc += load32(srcs.p[j], i, dt) * s;
	}
	store32(dst, i, dt, acc);
}

// VEC_UNROLL is the 16-byte words each thread of reduce's vector loop
// loads from a source before it adds any of them: with 256 threads a
// block keeps 16 KiB of each source in flight. By Little's law HBM3e's
// 4.8 TB/s at about 1 µs of loaded latency needs some 36 KiB in flight
// per SM of an H200's 132; one element per thread (512 bytes of bf16 per
// block) kept the 2-byte dtypes near a quarter of it.
#define VEC_UNROLL 4

// widen unpacks one 16-byte word of DT into float32 elements; narrow packs
// them back, rounding as store32 does.
template <int DT> struct Vec;

template <> struct Vec<DT_F32> {
	enum { E = 4 };
	static __device__ __forceinline__ void widen(uint4 w, float* f) {
		f[0] = __uint_as_float(w.x);
		f[1] = __uint_as_float(w.y);
		f[2] = __uint_as_float(w.z);
		f[3] = __uint_as_float(w.w);
	}
	static __device__ __forceinline__ uint4 narrow(const float* f) {
		return make_uint4(quiet32(__float_as_uint(f[0])), quiet32(__float_as_uint(f[1])),
		                  quiet32(__float_as_uint(f[2])), quiet32(__float_as_uint(f[3])));
	}
};

template <> struct Vec<DT_BF16> {
	enum { E = 8 };
	static __device__ __forceinline__ void widen(uint4 w, float* f) {
		u32 v[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
		for (int k = 0; k < 4; k++) {
			f[2 * k] = f32_from_bf16((u16)(v[k] & 0xffffu));
			f[2 * k + 1] = f32_from_bf16((u16)(v[k] >> 16));
		}
	}
	static __device__ __forceinline__ uint4 narrow(const float* f) {
		u32 v[4];
#pragma unroll
		for (int k = 0; k < 4; k++) {
			v[k] = (u32)bf16_from_f32(f[2 * k]) | ((u32)bf16_from_f32(f[2 * k + 1]) << 16);
		}
		return make_uint4(v[0], v[1], v[2], v[3]);
	}
};

// f32_from_f16_cvt widens with the hardware's conversion, one instruction
// where f32_from_f16 takes a dozen, which made the fp16 reduction
// compute-bound at half of HBM bandwidth on an H200. It equals
// f32_from_f16 on every non-NaN (widening is exact, subnormals included);
// a NaN may lose its payload, which the reduction's next operation, a
// multiplication whose NaN results are the canonical NaN on the device,
// loses anyway.
__device__ __forceinline__ float f32_from_f16_cvt(u16 h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}

template <> struct Vec<DT_F16> {
	enum { E = 8 };
	static __device__ __forceinline__ void widen(uint4 w, float* f) {
		u32 v[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
		for (int k = 0; k < 4; k++) {
			f[2 * k] = f32_from_f16_cvt((u16)(v[k] & 0xffffu));
			f[2 * k + 1] = f32_from_f16_cvt((u16)(v[k] >> 16));
		}
	}
	static __device__ __forceinline__ uint4 narrow(const float* f) {
		u32 v[4];
#pragma unroll
		for (int k = 0; k < 4; k++) {
			v[k] = (u32)f16_from_f32(f[2 * k]) | ((u32)f16_from_f32(f[2 * k + 1]) << 16);
		}
		return make_uint4(v[0], v[1], v[2], v[3]);
	}
};

// reduce_words reduces words 16-byte words starting off bytes into dst
// and every source (all 16-byte aligned there), VEC_UNROLL words a thread
// at a time: each source's loads are issued together, then added in
// source order, so the arithmetic per element is reduce_elem's.
template <int DT>
__device__ __forceinline__ void reduce_words(char* dst, const Srcs& srcs, i64 nsrc, i64 off, i64 words, float s) {
	const int E = Vec<DT>::E;
	const i64 stride = (i64)gridDim.x * blockDim.x;
	for (i64 base = (i64)blockIdx.x * blockDim.x + threadIdx.x; base < words; base += stride * VEC_UNROLL) {
		float acc[VEC_UNROLL][E];
#pragma unroll
		for (int u = 0; u < VEC_UNROLL; u++) {
#pragma unroll
			for (int e = 0; e < E; e++) {
				acc[u][e] = 0.0f;
			}
		}
		for (i64 j = 0; j < nsrc; j++) {
			const uint4* p = (const uint4*)((const char*)srcs.p[j] + off);
			uint4 w[VEC_UNROLL];
#pragma unroll
			for (int u = 0; u < VEC_UNROLL; u++) {
				i64 i = base + u * stride;
				w[u] = i < words ? p[i] : make_uint4(0, 0, 0, 0);
			}
#pragma unroll
			for (int u = 0; u < VEC_UNROLL; u++) {
				float f[E];
				Vec<DT>::widen(w[u], f);
#pragma unroll
				for (int e = 0; e < E; e++) {
					acc[u][e] += f[e] * s;
				}
			}
		}
		uint4* q = (uint4*)(dst + off);
#pragma unroll
		for (int u = 0; u < VEC_UNROLL; u++) {
			i64 i = base + u * stride;
			if (i < words) {
				q[i] = Vec<DT>::narrow(acc[u]);
			}
		}
	}
}

// vec_head is the elements of size bytes before dst is 16-byte aligned,
// or -1 when the vector loop cannot run: a source not congruent to dst
// modulo 16, or elements that straddle the alignment.
__device__ __forceinline__ i64 vec_head(const void* dst, const Srcs& srcs, i64 nsrc, i64 n, i64 size) {
	u64 mis = (u64)dst & 15;
	for (i64 j = 0; j < nsrc; j++) {
		if (((u64)srcs.p[j] & 15) != mis) {
			return -1;
		}
	}
	u64 gap = (16 - mis) & 15;
	if (gap % size != 0) {
		return -1;
	}
	i64 head = (i64)(gap / size);
	return head < n ? head : n;
}

// reduce writes dst[i] = round_dt(sum_j round32(srcs[j][i] * scale)), the
// sum in float32 in source order from +0, as ReduceHost in
// executor/gpu/check.go (so -0 inputs sum to +0); fp64 in float64. Each
// thread reads every source's element i before writing dst[i], so dst
// may be one of the sources. Where dst and every source share their
// alignment modulo 16, the body runs in 16-byte words (reduce_words) and
// only the unaligned head and the tail element by element.
extern "C" __global__ void reduce(void* dst, Srcs srcs, i64 nsrc, i64 n, i64 dt, double scale) {
	if (dt == DT_F64) {
		GRID_STRIDE(i, n) {
			double acc = 0.0;
			for (i64 j = 0; j < nsrc; j++) {
				acc += ldf64(srcs.p[j], i) * scale;
			}
			stf64(dst, i, acc);
		}
		return;
	}
	float s = (float)scale; // exact: the host passes a float32
	i64 size = dt == DT_F32 ? 4 : 2;
	i64 head = vec_head(dst, srcs, nsrc, n, size);
	if (head < 0) {
		GRID_STRIDE(i, n) { reduce_elem(dst, srcs, nsrc, i, (int)dt, s); }
		return;
	}
	i64 per = 16 / size;
	i64 words = (n - head) / per;
	i64 tail = head + words * per;
	GRID_STRIDE(i, head) { reduce_elem(dst, srcs, nsrc, i, (int)dt, s); }
	GRID_STRIDE(i, n - tail) { reduce_elem(dst, srcs, nsrc, tail + i, (int)dt, s); }
	char* d = (char*)dst;
	switch (dt) {
	case DT_F32:
		reduce_words<DT_F32>(d, srcs, nsrc, head * size, words, s);
		break;
	case DT_BF16:
		reduce_words<DT_BF16>(d, srcs, nsrc, head * size, words, s);
		break;
	default:
		reduce_words<DT_F16>(d, srcs, nsrc, head * size, words, s);
		break;
	}
}

// divide divides in place: x = round_dt(x / f), the correctly rounded
// quotient of float32 operands (f rounded to float32); fp64 in fp64.
extern "C" __global__ void divide(void* p, i64 dt, i64 n, double f) {
	if (dt == DT_F64) {
		GRID_STRIDE(i, n) { stf64(p, i, ldf64(p, i) / f); }
		return;
	}
	float f32 = f32_from_f64(f);
	GRID_STRIDE(i, n) { store32(p, i, (int)dt, load32(p, i, (int)dt) / f32); }
}

// add computes dst += src elementwise: in float32 (src rounded to float32
// when it is fp64) and rounded to dst's dtype; in float64 when dst is fp64.
extern "C" __global__ void add(void* dst, i64 dt, const void* src, i64 st, i64 n) {
	if (dt == DT_F64) {
		GRID_STRIDE(i, n) { stf64(dst, i, ldf64(dst, i) + load64(src, i, (int)st)); }
		return;
	}
	GRID_STRIDE(i, n) { store32(dst, i, (int)dt, load32(dst, i, (int)dt) + load32(src, i, (int)st)); }
}

// splitmix64 is Steele, Lea and Flood's SplitMix64 finaliser, as in
// executor/gpu/pattern.go.
__device__ __forceinline__ u64 splitmix64(u64 x) {
	u64 z = x + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

// fill_pattern writes gpu.Pattern(seed, i): k/64 with k in [-64, 64), exact
// in every dtype.
extern "C" __global__ void fill_pattern(void* p, i64 dt, i64 n, u64 seed) {
	GRID_STRIDE(i, n) {
		u64 h = splitmix64(seed ^ ((u64)i * 0xd1b54a32d192ed03ull));
		float v = (float)((int)(h >> 57) - 64) / 64.0f;
		store32(p, i, (int)dt, v);
	}
}

// --- stand-ins for compute and links ----------------------------------------

__device__ __forceinline__ u64 globaltimer() {
	u64 t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// spin keeps its (single-thread) block resident for ns nanoseconds of the
// global timer: a stand-in for compute of a modelled duration that leaves
// the rest of the device free. With ns = 0 it is an empty kernel, which
// the backend's calibration launches to measure launch overhead.
extern "C" __global__ void spin(i64 ns) {
	if (threadIdx.x != 0) {
		return;
	}
	u64 end = globaltimer() + (u64)ns;
	while (globaltimer() < end) {
		__nanosleep(256);
	}
}

// burn_sink receives burn's results only on a condition that never holds,
// so the compiler cannot drop the loop.
__device__ float burn_sink;

// burn runs iters rounds of 8 independent fused multiply-adds per thread:
// a stand-in that loads every SM, so communication kernels compete for the
// device as they would with real compute. The chains converge to a fixed
// point (x = 0.5x + 0.25 -> 0.5), so no denormals or infinities slow them.
extern "C" __global__ void burn(i64 iters) {
	float a0 = threadIdx.x * 1e-3f, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3;
	float a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
	const float m = 0.5f, c = 0.25f;
	for (i64 k = 0; k < iters; k++) {
		a0 = __fmaf_rn(a0, m, c);
		a1 = __fmaf_rn(a1, m, c);
		a2 = __fmaf_rn(a2, m, c);
		a3 = __fmaf_rn(a3, m, c);
		a4 = __fmaf_rn(a4, m, c);
		a5 = __fmaf_rn(a5, m, c);
		a6 = __fmaf_rn(a6, m, c);
		a7 = __fmaf_rn(a7, m, c);
	}
	float r = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
	if (r == -1.0f) {
		burn_sink = r;
	}
}

// PACE_CHUNK is the bytes a block copies between two looks at the timer:
// 256 threads moving 16 bytes eight times, all eight loads issued before
// any store, so a block keeps 32 KiB in flight (about 30 GB/s at 1 µs of
// latency; pacedBlockRate in kernels.go assumes a third of that).
#define COPY_UNROLL 8
#define PACE_CHUNK (256 * 16 * COPY_UNROLL)

// copy_words copies words 16-byte words with the block's threads,
// COPY_UNROLL loads in flight per thread before the stores.
__device__ __forceinline__ void copy_words(uint4* dst, const uint4* src, i64 words) {
	i64 w = threadIdx.x;
	const i64 step = blockDim.x;
	for (; w + (COPY_UNROLL - 1) * step < words; w += COPY_UNROLL * step) {
		uint4 v[COPY_UNROLL];
#pragma unroll
		for (int u = 0; u < COPY_UNROLL; u++) {
			v[u] = src[w + u * step];
		}
#pragma unroll
		for (int u = 0; u < COPY_UNROLL; u++) {
			dst[w + u * step] = v[u];
		}
	}
	for (; w < words; w += step) {
		dst[w] = src[w];
	}
}

// copy_span copies bytes [lo, hi) with the block's threads: in 16-byte
// words where dst and src are congruent modulo 16 (after a head of single
// bytes up to the alignment), in 4-byte words where they are congruent
// modulo 4, the rest byte by byte.
__device__ __forceinline__ void copy_span(char* dst, const char* src, i64 lo, i64 hi) {
	u64 d = (u64)(dst + lo), s = (u64)(src + lo);
	i64 bytes = hi - lo;
	for (int align = 16; align >= 4; align /= 4) {
		if (((d ^ s) & (u64)(align - 1)) != 0) {
			continue;
		}
		i64 head = (i64)((align - (d & (u64)(align - 1))) & (u64)(align - 1));
		if (head > bytes) {
			head = bytes;
		}
		for (i64 b = threadIdx.x; b < head; b += blockDim.x) {
			dst[lo + b] = src[lo + b];
		}
		i64 words = (bytes - head) / align;
		if (align == 16) {
			copy_words((uint4*)(dst + lo + head), (const uint4*)(src + lo + head), words);
		} else {
			u32* dw = (u32*)(dst + lo + head);
			const u32* sw = (const u32*)(src + lo + head);
			for (i64 w = threadIdx.x; w < words; w += blockDim.x) {
				dw[w] = sw[w];
			}
		}
		lo += head + words * align;
		break;
	}
	for (i64 b = lo + threadIdx.x; b < hi; b += blockDim.x) {
		dst[b] = src[b];
	}
}

// paced_copy copies bytes from src to dst no faster than bytes_per_ns in
// all: block b copies its contiguous share at bytes_per_ns / gridDim.x
// from the moment it starts, chunk by chunk, waiting on the global timer
// after each chunk until the chunk's deadline. Whatever the blocks'
// start times, no span of time sees more than the rate, and the copy
// takes at least bytes / bytes_per_ns.
extern "C" __global__ void paced_copy(char* dst, const char* src, i64 bytes, double bytes_per_ns) {
	__shared__ u64 t0;
	i64 share = (bytes + gridDim.x - 1) / gridDim.x;
	share = (share + 15) / 16 * 16;
	i64 lo = (i64)blockIdx.x * share;
	i64 hi = lo + share < bytes ? lo + share : bytes;
	if (lo >= hi) {
		return;
	}
	double rate = bytes_per_ns / gridDim.x;
	if (threadIdx.x == 0) {
		t0 = globaltimer();
	}
	__syncthreads();
	for (i64 c = lo; c < hi; c += PACE_CHUNK) {
		i64 end = c + PACE_CHUNK < hi ? c + PACE_CHUNK : hi;
		copy_span(dst, src, c, end);
		if (threadIdx.x == 0) {
			u64 deadline = t0 + (u64)((double)(end - lo) / rate);
			while (globaltimer() < deadline) {
				__nanosleep(128);
			}
		}
		__syncthreads();
	}
}

// --- grouped moves ------------------------------------------------------------

// Move is one piece of a grouped move (a gpu.Run, split on the host into
// pieces of at most 64 KiB): with types 0 (MOVE_BYTES), a copy of n bytes
// from src+src_off to dst+dst_off; otherwise a cast of n elements of
// dtype types>>8 to dtype types&0xff. cuda/movetable.go writes them.
struct Move {
	i64 dst_off, src_off, n, types;
};

#define MOVE_BYTES 0

// moves runs a plan op's copies and casts in one launch: block b takes
// pieces b, b + gridDim.x, ... of the table, a copy (copy_span) or an
// element-wise cast (as cast).
extern "C" __global__ void moves(char* dst, const char* src, const Move* table, i64 count) {
	for (i64 m = blockIdx.x; m < count; m += gridDim.x) {
		Move mv = table[m];
		int dt = (int)(mv.types & 0xff), st = (int)(mv.types >> 8);
		char* d = dst + mv.dst_off;
		const char* s = src + mv.src_off;
		if (mv.types == MOVE_BYTES) {
			copy_span(d, s, 0, mv.n);
		} else if (dt == DT_F64) {
			for (i64 i = threadIdx.x; i < mv.n; i += blockDim.x) {
				store64(d, i, DT_F64, load64(s, i, st));
			}
		} else {
			for (i64 i = threadIdx.x; i < mv.n; i += blockDim.x) {
				store32(d, i, dt, load32(s, i, st));
			}
		}
	}
}
