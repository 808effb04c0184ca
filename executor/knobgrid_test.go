package executor

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// TestKnobGrid plans every zoo model under every combination of the
// decisions whose interplay the emitter's per-group rules must get right
// (issue #33): unit granularity × reshard_after_forward (true, false, an
// int) × grad_accum (1, 2) × frozen or trainable base, on 4 ranks and two
// blocks per repeat. Every plan must be proved safe (schedule.Prove) and
// run on the host backend bit for bit against the reference. The short
// tier runs the case issue #33 found (llama3-8b-lora, block children,
// reshard to 2, frozen) and one case of each other value; the full grid
// (288 plans, about 10 s) runs in go test without -short, as .ci/run does.
func TestKnobGrid(t *testing.T) {
	type knob struct {
		name  string
		edits []edit
	}
	units := []knob{
		{"blocks", nil},
		{"2-blocks", []edit{policy("blocks_per_unit", "2")}},
		// A unit inside a checkpoint region is refused, so block children
		// train without checkpointing.
		{"block-children", []edit{policy("units", `"block-children"`), train("checkpointing", `"none"`)}},
	}
	reshards := []knob{
		{"reshard-true", []edit{policy("reshard_after_forward", "true")}},
		{"reshard-false", []edit{policy("reshard_after_forward", "false")}},
		{"reshard-2", []edit{policy("reshard_after_forward", "2")}},
	}
	accums := []knob{
		{"ga1", []edit{train("grad_accum", "1")}},
		{"ga2", []edit{train("grad_accum", "2")}},
	}
	bases := []knob{{"trainable", nil}, {"frozen", nil}}
	short := map[string]bool{
		"llama3-8b-lora/block-children/reshard-2/ga2/frozen": true,
		"llama3-8b-lora/block-children/reshard-2/ga1/frozen": true,
		"gpt2-124m/blocks/reshard-true/ga1/trainable":        true,
		"gpt2-124m/2-blocks/reshard-false/ga2/frozen":        true,
		"llama3-8b/block-children/reshard-2/ga2/trainable":   true,
		"t5-base/block-children/reshard-2/ga1/frozen":        true,
	}
	ran := 0
	for _, name := range plans.Names() {
		for _, u := range units {
			for _, r := range reshards {
				for _, a := range accums {
					for _, b := range bases {
						id := strings.Join([]string{name, u.name, r.name, a.name, b.name}, "/")
						if testing.Short() && !short[id] {
							continue
						}
						ran++
						t.Run(id, func(t *testing.T) {
							t.Parallel()
							edits := append(world(4), layers(2))
							edits = append(edits, u.edits...)
							edits = append(edits, r.edits...)
							edits = append(edits, a.edits...)
							if b.name == "frozen" {
								edits = append(edits, freezeBase)
							} else {
								edits = append(edits, unfreeze)
							}
							p, err := zooPlanErr(name, edits...)
							if err != nil {
								t.Fatal(err)
							}
							if _, err := schedule.Prove(p); err != nil {
								t.Fatalf("the plan is unsafe: %v", err)
							}
							k := scaleFor(t, p, 40_000)
							rep := mustRun(t, p, Options{Scale: k, Steps: 2})
							t.Logf("scale %d: %d ops, run %v", k, rep.Ops, rep.Times.Run.Round(time.Millisecond))
						})
					}
				}
			}
		}
	}
	if testing.Short() && ran != len(short) {
		t.Errorf("the short tier names %d cases, %d of them in the grid", len(short), ran)
	}
}

// freezeBase freezes the model as LoRA does its base: every top-level
// module is requires_grad = false and only the last child of each
// repeated block trains, so the units before it in the first block see
// neither a trainable parameter nor an input with a gradient (their
// output needs none, and FSDP2 fires no pre-backward for them). A file
// that freezes already (llama3-8b-lora) is left as it is.
func freezeBase(src string) string {
	if strings.Contains(src, "requires_grad = false") {
		return src
	}
	src = topModuleRE.ReplaceAllString(src, "${1}\nrequires_grad = false")
	for _, b := range blockRE.FindAllStringSubmatch(src, -1) {
		re := regexp.MustCompile(`(?m)^\[\[block\.` + regexp.QuoteMeta(b[1]) + `\.module\]\]\nname = "[^"]*"`)
		all := re.FindAllStringIndex(src, -1)
		end := all[len(all)-1][1]
		src = src[:end] + "\nrequires_grad = true" + src[end:]
	}
	return src
}

// unfreeze makes every parameter of a frozen file train.
func unfreeze(src string) string {
	return regexp.MustCompile(`(?m)^requires_grad = false\n`).ReplaceAllString(src, "")
}

var (
	topModuleRE = regexp.MustCompile(`(?m)^(\[\[module\]\]\nname = "[^"]*")`)
	blockRE     = regexp.MustCompile(`(?m)^\[block\.([^.\]]+)\]`)
)
