package torchgen

import (
	"fmt"
	"testing"
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
