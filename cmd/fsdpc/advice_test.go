package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanTuneNamesPins: plan -tune says what the file pins and what
// changing each would give, in text and under tuning.pinned in JSON: on
// llama3-8b selective-op checkpointing instead of the file's full is
// suggested (it fits, and is the fastest alternative that does:
// selective-layer is within a point of it), no
// checkpointing is named as not fitting, and a
// larger micro-batch is suggested while memory is mostly free.
func TestPlanTuneNamesPins(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plan.bin")
	code, out, errOut := runCLI("plan", "-tune", "llama3-8b", "-o", bin)
	if code != 0 {
		t.Fatalf("plan -tune exited %d: %s", code, errOut)
	}
	for _, want := range []string{
		"pinned by the file (the tuner keeps these)",
		"  [train] checkpointing = \"full\"\n",
		"  -> checkpointing = \"selective-op\": +",
		"     checkpointing = \"none\": does not fit: peak ",
		"  [train] micro_batch = 1, grad_accum = 1\n",
		"  -> micro_batch = 2, grad_accum = 1 (2× the tokens per step: a larger global batch): +",
		"  [policy] param_dtype = \"bf16\"\n    no other value the tuner tries\n",
		"  [policy] reduce_dtype = \"fp32\"\n  -> reduce_dtype = \"bf16\": +",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan -tune lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = runCLI("plan", "-tune", "-json", "llama3-8b", "-o", bin)
	if code != 0 {
		t.Fatalf("plan -tune -json exited %d: %s", code, errOut)
	}
	var doc struct {
		Tuning struct {
			Usable int64 `json:"usable"`
			Best   struct {
				Reserved int64 `json:"reserved"`
			} `json:"best"`
			Pinned []pinDoc `json:"pinned"`
		} `json:"tuning"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	noDisplayStrings(t, "plan -tune", raw)
	noNulls(t, "plan -tune", raw)
	var found bool
	for _, p := range doc.Tuning.Pinned {
		if p.Setting != "checkpointing" {
			continue
		}
		for _, a := range p.Alternatives {
			if strings.Join(a.Change, "") != `checkpointing = "selective-op"` {
				continue
			}
			found = true
			if !a.Planned || !a.Fits || !a.Suggested || a.ThroughputChange < 0.10 || a.Reserved > doc.Tuning.Usable || a.Reserved <= doc.Tuning.Best.Reserved {
				t.Errorf("selective-op: %+v (usable %d, tuned %d)", a, doc.Tuning.Usable, doc.Tuning.Best.Reserved)
			}
		}
	}
	if !found {
		t.Errorf("tuning.pinned has no selective-op alternative to checkpointing: %+v", doc.Tuning.Pinned)
	}
}
