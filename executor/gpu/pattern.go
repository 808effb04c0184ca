package gpu

// Pattern is element i of the fill pattern with the given seed: one of the
// 128 values k/64, −64 ≤ k < 64, exact in every float dtype the device
// kernels handle, so a filled buffer means the same numbers whatever its
// dtype. The fill kernel (cuda/kernels.cu, fill_pattern) computes the same
// function; keep the two in step.
func Pattern(seed uint64, i int64) float32 {
	h := splitmix64(seed ^ uint64(i)*0xd1b54a32d192ed03)
	return float32(int(h>>57)-64) / 64
}

// splitmix64 is Steele, Lea and Flood's SplitMix64 finaliser.
func splitmix64(x uint64) uint64 {
	z := x + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
