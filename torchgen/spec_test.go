package torchgen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
)

// Build hands apply_plan the settings that make FSDP2 do what the plan
// says: prefetch lists with the planner's targets, and divide settings
// recovered from the plan's reduce ops and factors.
func TestBuildGroupSettings(t *testing.T) {
	tests := []struct {
		name, cluster, policy string
		// for group layers.0 (index 1: the root comes first)
		fwd, bwd []int
		factor   float64
		force    bool
	}{
		{name: "defaults", cluster: "world_size = 2"},
		{name: "prefetch 2", cluster: "world_size = 2", policy: "prefetch_forward = 2\nprefetch_backward = 2", fwd: []int{2}}, // backward: nothing after layers.0
		{name: "prefetch 1", cluster: "world_size = 2", policy: "prefetch_forward = 1\nprefetch_backward = 1", fwd: []int{2}},
		{name: "custom factor", cluster: "world_size = 2", policy: "gradient_divide_factor = 3", factor: 3},
		{name: "factor = world", cluster: "world_size = 2", policy: "gradient_divide_factor = 2"},
		{name: "forced sum", cluster: "world_size = 4", policy: "force_sum_reduction = true", force: true},
		{name: "fp16 sums by itself", cluster: "world_size = 4", policy: `reduce_dtype = "fp16"`},
		{name: "fp16 custom factor", cluster: "world_size = 4", policy: "reduce_dtype = \"fp16\"\ngradient_divide_factor = 8", factor: 8},
		{name: "hsdp factor = shard", cluster: "world_size = 4\nmesh = { replicate = 2, shard = 2 }", policy: "gradient_divide_factor = 2", factor: 2},
		{name: "hsdp factor = dp", cluster: "world_size = 4\nmesh = { replicate = 2, shard = 2 }", policy: "gradient_divide_factor = 4", factor: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := planSpec(t, "m.toml", fmt.Sprintf(decoderModel, "", tt.cluster, tt.policy, "", ""))
			g := s.Groups[1]
			if g.Modules[0] != "layers.0" {
				t.Fatalf("group 1 is %v", g.Modules)
			}
			if fmt.Sprint(g.PrefetchForward) != fmt.Sprint(tt.fwd) || fmt.Sprint(g.PrefetchBackward) != fmt.Sprint(tt.bwd) {
				t.Errorf("prefetch forward %v backward %v, want %v %v", g.PrefetchForward, g.PrefetchBackward, tt.fwd, tt.bwd)
			}
			if g.DivideFactor != tt.factor || g.ForceSum != tt.force {
				t.Errorf("divide factor %v force sum %v, want %v %v", g.DivideFactor, g.ForceSum, tt.factor, tt.force)
			}
		})
	}
}

// The mirror adds a container's own parameters to its outputs, so a block
// with parameters of its own that says it returns its child's tensor
// cannot be mirrored where its inner unit ends with it; with output =
// "own", or with no unit ending there, it can.
func TestBuildRefusesUnmirrorableChildOutput(t *testing.T) {
	src := func(block string) string {
		s := strings.Replace(fmt.Sprintf(decoderModel, "", "world_size = 2", nestedUnits, "", ""), "units = \"blocks\"\n", "", 1)
		s = strings.Replace(s, "[block.decoder]\n", "[block.decoder]\n"+block+"\n", 1)
		return strings.Replace(s, "[[block.decoder.module]]\n", "[[block.decoder.param]]\nname = \"scale\"\nshape = [8]\n[[block.decoder.module]]\n", 1)
	}
	for _, c := range []struct{ block, want string }{
		{`output = "child"`, `module "layers.0" has parameters of its own and returns its child's tensor`},
		{`output = "own"`, ""},
	} {
		m, err := ir.Load("m.toml", []byte(src(c.block)))
		if err != nil {
			t.Fatal(err)
		}
		p, err := planner.Plan(m, planner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Build(m, p)
		if got := fmt.Sprint(err); c.want == "" && err != nil || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: Build: %v, want %q", c.block, err, c.want)
		}
	}
}
