package executor

import "github.com/fsdpc/fsdpc/ir"

// Numerics other backends check against, exported from the host's.

// LoadElement reads element i of a dt array as a float64 (exact for every
// dtype the executor handles).
func LoadElement(dt ir.DType, b []byte, i int64) float64 { return load(dt, b, i) }

// StoreElement writes v, rounded to nearest even, as element i of a dt
// array.
func StoreElement(dt ir.DType, b []byte, i int64, v float64) { store(dt, b, i, v) }

// RoundTo rounds v to the nearest dt value, ties to even.
func RoundTo(dt ir.DType, v float64) float64 { return roundTo(dt, v) }

// ExpectedGathered is what the unsharded parameters of the kernel's group
// must hold in a step, from the reference; nil when the run has no
// reference for it.
func (k *Kernel) ExpectedGathered(step int) []byte {
	if k.Expect == nil || k.Group == nil || step < 0 || step >= len(k.Expect.gathered) {
		return nil
	}
	return k.Expect.gathered[step][k.Group.Index]
}
