package hardware

import (
	"math"
	"testing"
)

// TestElementwiseShares: the forward and gradient kernels' shares are
// Liger-Kernel's forward-only and backward-only figures wherever the
// both-passes share is the measured one, a pass of one byte forward to two
// backward takes what it takes at that share (to 0.5%), and no share
// passes a copy's.
func TestElementwiseShares(t *testing.T) {
	c := CalibrationFor(gpus["a100-40gb"].Device)
	if c.ElementwiseEfficiency != elementwiseHBM2e {
		t.Fatalf("A100 element-wise share %g, want %g", c.ElementwiseEfficiency, elementwiseHBM2e)
	}
	fwd, bwd := c.ElementwiseShares()
	if math.Abs(fwd-0.629) > 1e-9 || math.Abs(bwd-0.476) > 1e-9 {
		t.Errorf("A100 shares %g forward, %g backward; want Liger's 0.629 and 0.476", fwd, bwd)
	}
	for _, share := range []float64{elementwiseHBM2e, elementwiseHBM3} {
		c.ElementwiseEfficiency = share
		fwd, bwd := c.ElementwiseShares()
		if mixed := 3 / (1/fwd + 2/bwd); math.Abs(mixed/share-1) > 0.005 {
			t.Errorf("share %g: one byte forward to two backward at %g, want about the share", share, mixed)
		}
	}
	d := DefaultCalibration
	if fwd, bwd := d.ElementwiseShares(); fwd > d.MemoryEfficiency || bwd > d.MemoryEfficiency {
		t.Errorf("default shares %g, %g exceed the copies' %g", fwd, bwd, d.MemoryEfficiency)
	}
}
