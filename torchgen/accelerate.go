package torchgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsdpc/fsdpc/python"
	"github.com/fsdpc/fsdpc/schedule"
)

// AccelerateCase is one accelerate config and the plan fsdpc made from
// it: accelerate's own FSDP2 path prepares the model the config names
// (Model, a Hugging Face config.json transformers builds) and the record
// of its first step is compared with Plan (CompareAccelerate).
type AccelerateCase struct {
	Name   string // for messages
	Config []byte // the accelerate config file's text
	Model  []byte // the model's config.json
	Plan   *schedule.Plan
	Export *Export // Plan's export (NewExport); nil: no plan (a config fsdpc refuses), accelerate runs alone
	// ApplyPlan: fsdpc.apply_plan shards the model as Plan says after
	// Accelerator() and before accelerator.prepare (the hook
	// docs/accelerate.md documents for what accelerate's keys cannot say).
	ApplyPlan bool
}

// AccelerateRecord is what one rank recorded of accelerate's FSDP2 run
// (python/fsdpc/accelerate_check.py): the harness's Record (layouts of
// the plan's units, collectives, group events), accelerate's fully_shard
// calls in order, and every FSDP2 state they left.
type AccelerateRecord struct {
	Record
	Accelerate string          `json:"accelerate"`
	Calls      []FullyShardArg `json:"calls"`
	States     []FSDPState     `json:"states"`
	// Checkpointed are the modules accelerate's activation checkpointing
	// wrapped (checkpoint_wrapper), in module order.
	Checkpointed []string `json:"checkpointed"`
	// Error is what the case raised on this rank instead (accelerate or
	// torch refusing the config, say), and Where the file and line.
	Error string `json:"error"`
	Where string `json:"where"`
}

// FullyShardArg is one fully_shard call: the modules it was given and the
// reshard_after_forward it passed ("default" when none).
type FullyShardArg struct {
	Modules []string `json:"modules"`
	Reshard any      `json:"reshard_after_forward"`
}

// FSDPState is one FSDP2 state as the step left it: its modules, and for
// a state with parameters the resolved reshard_after_forward (true, false
// or a rank count), MixedPrecisionPolicy dtypes ("" for None), offload,
// and its parameters with their padded shard sizes.
type FSDPState struct {
	Modules     []string `json:"modules"`
	Reshard     any      `json:"reshard_after_forward"`
	ParamDType  string   `json:"param_dtype"`
	ReduceDType string   `json:"reduce_dtype"`
	OutputDType string   `json:"output_dtype"`
	Offload     bool     `json:"offload"`
	Params      []struct {
		FQN    string  `json:"fqn"`
		Padded []int64 `json:"padded"`
	} `json:"params"`
}

// RunAccelerate runs every case under accelerate in one launch (one set of
// rank processes imports torch, transformers and accelerate once): the
// package's accelerate_check reads each config as `accelerate launch`
// does and starts as many ranks as it names, which must be the same for
// every case. It returns each case's per-rank records.
func RunAccelerate(py Python, cases []AccelerateCase, timeout time.Duration, stderr io.Writer) ([][]AccelerateRecord, error) {
	type caseFile struct {
		Config string `json:"config"`
		Plan   string `json:"plan"`
		Model  string `json:"model"`
		Out    string `json:"out"`
		Apply  bool   `json:"apply_plan"`
	}
	var files []caseFile
	setup := func(dir string) error {
		if err := python.WriteTo(dir); err != nil {
			return err
		}
		for i, c := range cases {
			d := fmt.Sprintf("case%d", i)
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				return err
			}
			files = append(files, caseFile{Config: d + "/accelerate.yaml", Model: d + "/config.json", Out: d, Apply: c.ApplyPlan})
			out := map[string][]byte{"accelerate.yaml": c.Config, "config.json": c.Model}
			if c.Export != nil {
				plan, err := json.Marshal(c.Export)
				if err != nil {
					return err
				}
				out["plan.json"] = plan
				files[i].Plan = d + "/plan.json"
			}
			for name, data := range out {
				if err := os.WriteFile(filepath.Join(dir, d, name), data, 0o644); err != nil {
					return err
				}
			}
		}
		list, err := json.Marshal(files)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "cases.json"), list, 0o644)
	}
	var recs [][]AccelerateRecord
	collect := func(dir string) error {
		for i, c := range cases {
			// Every rank of the config's num_processes wrote one.
			var ranks []AccelerateRecord
			for r := 0; ; r++ {
				b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("case%d", i), fmt.Sprintf("rank%d.json", r)))
				if errors.Is(err, fs.ErrNotExist) && r > 0 {
					break
				}
				if err != nil {
					return fmt.Errorf("%s: rank %d wrote no record: %w", c.Name, r, err)
				}
				var rec AccelerateRecord
				if err := json.Unmarshal(b, &rec); err != nil {
					return fmt.Errorf("%s: rank %d's record: %w", c.Name, r, err)
				}
				ranks = append(ranks, rec)
			}
			if c.Export != nil && len(ranks) != c.Export.Mesh.WorldSize {
				return fmt.Errorf("%s: %d ranks ran, the plan has %d", c.Name, len(ranks), c.Export.Mesh.WorldSize)
			}
			recs = append(recs, ranks)
		}
		return nil
	}
	_, err := py.RunScript(Script{
		Setup:   setup,
		Args:    []string{"-m", "fsdpc.accelerate_check", "cases.json"},
		Timeout: timeout,
		Stderr:  stderr,
		Collect: collect,
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}
