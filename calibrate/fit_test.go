package calibrate

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/hardware"
)

func loadSet(t *testing.T) *Set {
	t.Helper()
	f, err := os.Open("published-runs.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set, err := Load("published-runs.csv", f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestFit: fitting the GEMM efficiency to the A100 runs converges inside
// its bounds and does not make the fit worse; a starved search fails.
func TestFit(t *testing.T) {
	set := loadSet(t)
	fit, err := set.Fit([]string{"a100-80gb"}, []string{"max_efficiency"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fit.Cal.MaxEfficiency; got < 0.3 || got > 0.95 {
		t.Errorf("max_efficiency %g outside its bounds", got)
	}
	// 16 A100 runs ran and fit: the two OOM rows are left out. The search
	// lowers its own objective; MAPE, a different measure, may move a
	// little either way.
	if fit.LossAfter > fit.LossBefore+1e-12 || len(fit.Residuals) != 16 || fit.After > fit.Before+1 {
		t.Errorf("squared log error %.5f -> %.5f, MAPE %.2f%% -> %.2f%% over %d runs", fit.LossBefore, fit.LossAfter, fit.Before, fit.After, len(fit.Residuals))
	}
	saved := maxEvaluations
	maxEvaluations = 2
	defer func() { maxEvaluations = saved }()
	if _, err := set.Fit([]string{"a100-80gb"}, []string{"max_efficiency"}); !errors.Is(err, ErrNotConverged) {
		t.Errorf("a starved fit: %v", err)
	}
}

func TestFitRefuses(t *testing.T) {
	set := loadSet(t)
	if _, err := set.Fit([]string{"a100-80gb"}, []string{"warp_speed"}); err == nil || !strings.Contains(err.Error(), `unknown parameter "warp_speed"`) {
		t.Errorf("unknown parameter: %v", err)
	}
	all := []string{"max_efficiency", "attention_forward", "attention_backward", "nic_efficiency", "memory_efficiency"}
	if _, err := set.Fit([]string{"h200"}, all); err == nil || !strings.Contains(err.Error(), "not enough") {
		t.Errorf("5 parameters from 4 runs: %v", err)
	}
}

// TestPredictKeepsRunProfile: a calibration under test replaces the GPU's
// built-in constants but not what a run's own plan sets (KempnerForge's
// cuDNN attention), so predicting with the built-in calibration passed
// explicitly gives the same figures as the plan's own model.
func TestPredictKeepsRunProfile(t *testing.T) {
	set := loadSet(t)
	own, err := set.Predict(nil)
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := set.Predict(func(gpu string) hardware.Calibration { return builtIn(gpu) })
	if err != nil {
		t.Fatal(err)
	}
	cudnn := 0
	for i := range own {
		if own[i].predTPS != explicit[i].predTPS {
			t.Errorf("row %s: %g tokens/s with the plan's model, %g with its calibration passed in", own[i].id, own[i].predTPS, explicit[i].predTPS)
		}
		if own[i].attentionKernel == "cudnn" {
			cudnn++
		}
	}
	if cudnn == 0 {
		t.Error("no run uses cuDNN attention: the test checks nothing")
	}
}
