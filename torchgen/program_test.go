package torchgen

import "testing"

// TestOptimizerConstructor: the program builds AdamW as the plan priced
// its step, and leaves PyTorch to choose where the plan does not say.
func TestOptimizerConstructor(t *testing.T) {
	for _, tc := range []struct {
		train ExportTrain
		want  string
	}{
		{ExportTrain{Optimizer: "adamw", OptimizerImplementation: "fused"}, "torch.optim.AdamW(params, lr=1e-3, fused=True)"},
		{ExportTrain{Optimizer: "adamw", OptimizerImplementation: "foreach"}, "torch.optim.AdamW(params, lr=1e-3, foreach=True)"},
		{ExportTrain{Optimizer: "adamw"}, "torch.optim.AdamW(params, lr=1e-3)"}, // a plan before format 10
		{ExportTrain{Optimizer: "sgd_momentum"}, "torch.optim.SGD(params, lr=1e-3, momentum=0.9)"},
		{ExportTrain{Optimizer: "lion"}, "torch.optim.AdamW(params, lr=1e-3)"}, // no torch constructor: the stand-in
	} {
		if got := optimizerConstructor(tc.train); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.train, got, tc.want)
		}
	}
}
