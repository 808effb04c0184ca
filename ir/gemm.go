package ir

import "sort"

// GEMM is the shape of Count identical matrix multiplies: an [M, K] by
// [K, N] product, 2·M·N·K FLOPs each. The cost model uses the shape for
// what a flat FLOP count cannot say: how many tiles of the output fill the
// GPU's SMs (wave quantisation) and whether the multiply is bound by
// memory rather than arithmetic (small N or K). docs/cost-model.md.
type GEMM struct {
	M     int64 `json:"m"`
	N     int64 `json:"n"`
	K     int64 `json:"k"`
	Count int64 `json:"count"`
}

// FLOPs is the work of all Count multiplies.
func (g GEMM) FLOPs() float64 { return 2 * f(g.M, g.N, g.K, g.Count) }

// backward returns the two multiplies of a forward GEMM y[M,N] = x[M,K]·W[K,N]
// in backward: the input gradient dx = dy·Wᵀ, an (M, K, N) product, and the
// weight gradient dW = xᵀ·dy, a (K, N, M) product.
func (g GEMM) backward() (dx, dw GEMM) {
	return GEMM{g.M, g.K, g.N, g.Count}, GEMM{g.K, g.N, g.M, g.Count}
}

func (g GEMM) known() bool { return g.M > 0 && g.N > 0 && g.K > 0 && g.Count > 0 }

// MergeGEMMs returns the GEMMs of lists in a canonical order (by M, N, K)
// with identical shapes merged into one entry, so a segment's list is the
// same whatever order its modules were visited in.
func MergeGEMMs(lists ...[]GEMM) []GEMM {
	var out []GEMM
	for _, l := range lists {
		out = append(out, l...)
	}
	if len(out) == 0 {
		return nil
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.M != b.M {
			return a.M < b.M
		}
		if a.N != b.N {
			return a.N < b.N
		}
		return a.K < b.K
	})
	n := 0
	for _, g := range out {
		if n > 0 && out[n-1].M == g.M && out[n-1].N == g.N && out[n-1].K == g.K {
			out[n-1].Count += g.Count
			continue
		}
		out[n] = g
		n++
	}
	return out[:n]
}
