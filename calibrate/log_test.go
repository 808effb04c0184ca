package calibrate

import (
	"os"
	"strings"
	"testing"
)

const titanLog = `[rank0]:[titan] 2025-10-30 14:32:58,897 - root - INFO - step:  1  loss:  8.1661  grad_norm:  3.6855  memory: 40.47GiB(50.12%)  tps: 3,502  tflops: 1.90  mfu: 0.19%
[rank0]:[titan] 2025-10-30 14:32:58,897 - root - INFO - Synchronizing and adjusting timeout for all ProcessGroups to 0:01:40
[rank0]:[titan] 2025-10-30 14:32:58,990 - root - INFO - step:  2  loss:  6.1098  grad_norm:  4.6416  memory: 41.49GiB(51.14%)  tps: 6,100  tflops: 96.17  mfu: 9.72%
[rank0]:[titan] 2025-10-30 14:32:59,077 - root - INFO - step:  3  loss:  4.7947  grad_norm:  2.4418  memory: 41.49GiB(51.14%)  tps: 6,300  tflops: 102.99  mfu: 10.41%
[rank0]:[titan] 2025-10-30 14:32:59,163 - root - INFO - step:  4  loss:  4.7000  grad_norm:  2.4000  memory: 41.50GiB(51.15%)  tps: 6,200  tflops: 102.00  mfu: 10.31%
`

// TestAddLog: a torchtitan log gives the median tps after step 1 and the
// largest reserved peak; a log without step lines is an error.
func TestAddLog(t *testing.T) {
	model, err := os.ReadFile("../plans/llama3-8b.toml")
	if err != nil {
		t.Fatal(err)
	}
	set := &Set{}
	if err := set.AddLog("llama3-8b.toml", model, "train.log", strings.NewReader(titanLog)); err != nil {
		t.Fatal(err)
	}
	r := set.Runs[0]
	if r.tokensPerGPU != 6200 || r.memGiB != 41.50 || !r.memReserved || r.gpu != "h100-sxm" || r.Plan == nil {
		t.Errorf("run %+v", r.run)
	}
	res, err := set.Predict(nil)
	if err != nil || !res[0].fits || res[0].predTPS <= 0 {
		t.Errorf("prediction %+v, %v", res, err)
	}
	if err := set.AddLog("llama3-8b.toml", model, "empty.log", strings.NewReader("nothing here\n")); err == nil || !strings.Contains(err.Error(), "empty.log: no torchtitan step lines") {
		t.Errorf("empty log: %v", err)
	}
}
