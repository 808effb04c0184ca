package schedule

import (
	"math"

	"github.com/fsdpc/fsdpc/ir"
)

// Throughput is a simulated step in the units a training log reports
// (torchtitan's tps, tflops and mfu). Every rank trains on its own data,
// so the figures per GPU are one rank's and the global ones W times them.
type Throughput struct {
	// Tokens one rank trains on per step (micro-batch × sequence length ×
	// gradient accumulation), and the whole cluster.
	TokensPerStepPerGPU int64
	TokensPerStep       int64
	// TokensPerSecondPerGPU is TokensPerStepPerGPU / StepTime.
	TokensPerSecondPerGPU float64
	// PeakFLOPS is the GPU's dense peak in the dtype the step's compute
	// mostly runs in (PeakDType), the denominator of MFU and HFU.
	PeakFLOPS float64
	PeakDType ir.DType
	// ModelFLOPsPerToken is the model's FLOPs per token by MFU's
	// convention (ir.MFUCounts): 0 when the model is not known (a plan
	// file alone carries no architecture), and then ModelFLOPS and MFU are
	// 0 too.
	ModelFLOPsPerToken float64
	// ModelFLOPS is the model FLOPs one GPU achieves per second
	// (torchtitan's tflops, ×1e12); MFU that over PeakFLOPS.
	ModelFLOPS, MFU float64
	// HardwareFLOPS is the FLOPs the step's kernels execute per second on
	// one GPU, as the cost model counts them: only the (query, key) pairs
	// a causal kernel computes, plus FlashAttention's and activation
	// checkpointing's recomputation; HFU is that over PeakFLOPS. With
	// causal attention and no checkpointing HFU can be below MFU.
	HardwareFLOPS, HFU float64
}

// NewThroughput puts a simulated step of p in a training log's units.
// flopsPerToken is the model's FLOPs per token by MFU's convention
// (ir.Model.FLOPsPerToken), or 0 if the model is not known.
func NewThroughput(p *Plan, stepTime, flopsPerToken float64) Throughput {
	t := Throughput{ModelFLOPsPerToken: flopsPerToken}
	t.TokensPerStepPerGPU = p.Train.MicroBatch * p.Train.SeqLen * max(p.Train.GradAccum, 1)
	t.TokensPerStep = t.TokensPerStepPerGPU * int64(p.Cluster.WorldSize)
	var hw float64
	byDType := map[ir.DType]float64{}
	for i := range p.Ops {
		if o := &p.Ops[i]; o.Kind == OpForward || o.Kind == OpBackward {
			hw += o.FLOPs
			byDType[o.DType] += o.FLOPs
		}
	}
	// The dtype with the most FLOPs; ties go to the lower dtype number so
	// the choice does not depend on map order.
	best := -1.0
	for dt, f := range byDType {
		if f > best || f == best && dt < t.PeakDType {
			best, t.PeakDType = f, dt
		}
	}
	if int(t.PeakDType) < len(p.Cluster.PeakFLOPS) {
		t.PeakFLOPS = p.Cluster.PeakFLOPS[t.PeakDType]
	}
	if stepTime <= 0 {
		return t
	}
	t.TokensPerSecondPerGPU = float64(t.TokensPerStepPerGPU) / stepTime
	t.ModelFLOPS = flopsPerToken * t.TokensPerSecondPerGPU
	t.HardwareFLOPS = hw / stepTime
	if t.PeakFLOPS > 0 {
		t.MFU = t.ModelFLOPS / t.PeakFLOPS
		t.HFU = t.HardwareFLOPS / t.PeakFLOPS
	}
	return t
}

// TrainTime is how long the whole cluster takes to train on tokens at
// stepTime per step, counting the last partial step as a whole one.
func (t Throughput) TrainTime(tokens, stepTime float64) float64 {
	if t.TokensPerStep <= 0 {
		return 0
	}
	return math.Ceil(tokens/float64(t.TokensPerStep)) * stepTime
}
