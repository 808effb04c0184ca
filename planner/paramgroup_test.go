package planner

import (
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// emitterFor is an emitter for a zoo model after the passes before emit.
func emitterFor(t *testing.T, name string) *emitter {
	t.Helper()
	s := &state{m: loadZoo(t, name)}
	for _, p := range passes {
		if p.name == "emit" {
			break
		}
		if err := s.run(p); err != nil {
			t.Fatal(err)
		}
	}
	return newEmitter(s)
}

// TestParamGroupTransitions drives one group through FSDP2's sharded
// states: the transitions FSDP2 makes leave no bug; one it refuses, or one
// that would drop a buffer without freeing it, is recorded naming the
// group, the transition and the state it was made from.
func TestParamGroupTransitions(t *testing.T) {
	type step func(pg *paramGroup)
	buf := func(pg *paramGroup) int {
		return pg.e.newBuffer(pg.index, schedule.BufUnsharded, schedule.PoolCompute, 1, false, "test")
	}
	unshardedTo := func(pg *paramGroup) { pg.toUnsharded(buf(pg)) }
	postForward := func(pg *paramGroup) { pg.toShardedPostForward(buf(pg)) }
	toSharded := func(pg *paramGroup) { pg.toSharded() }
	idle := func(pg *paramGroup) { pg.checkIdle() }
	freeStale := func(pg *paramGroup) { pg.e.free(pg.staleSlice); pg.staleSlice = none }
	tests := []struct {
		name  string
		steps []step
		state shardedState
		bug   string // "" for none
	}{
		{"reshard true", []step{unshardedTo, toSharded, idle}, sharded, ""},
		{"reshard N, gathered in backward", []step{unshardedTo, postForward, unshardedTo, toSharded, idle}, sharded, ""},
		{"reshard N, never gathered: stale until freed", []step{unshardedTo, postForward, toSharded, freeStale, idle}, sharded, ""},
		{"sharded to sharded is a no-op", []step{toSharded, toSharded, idle}, sharded, ""},
		{"post-forward slice from the shards", []step{postForward}, sharded, "to_sharded_post_forward in state sharded"},
		{"post-forward slice from a slice", []step{unshardedTo, postForward, postForward}, shardedPostForward, "to_sharded_post_forward in state sharded-post-forward"},
		{"unsharded twice", []step{unshardedTo, unshardedTo}, unsharded, "to_unsharded in state unsharded"},
		{"a second stale slice", []step{unshardedTo, postForward, toSharded, unshardedTo, postForward, toSharded}, shardedPostForward, "to_sharded with a stale post-forward slice held"},
		{"step ends unsharded", []step{unshardedTo, idle}, unsharded, "end of step in state unsharded"},
		{"step ends with a stale slice", []step{unshardedTo, postForward, toSharded, idle}, sharded, "stale slice held"},
		{"step ends with an all-gather pending", []step{func(pg *paramGroup) { pg.allGatherResult = allGatherResult{pending: true} }, idle}, sharded, "all-gather pending"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := emitterFor(t, "gpt2-124m")
			pg := &e.groups[1]
			for _, s := range tt.steps {
				s(pg)
			}
			if pg.state != tt.state {
				t.Errorf("state %s, want %s", pg.state, tt.state)
			}
			switch {
			case tt.bug == "" && e.bug != nil:
				t.Errorf("unexpected bug: %v", e.bug)
			case tt.bug != "" && e.bug == nil:
				t.Errorf("no bug recorded, want %q", tt.bug)
			case tt.bug != "" && !strings.Contains(e.bug.Error(), tt.bug):
				t.Errorf("bug %q, want it to contain %q", e.bug, tt.bug)
			case tt.bug != "" && !strings.Contains(e.bug.Error(), groupLabel(&e.p.Groups[1])):
				t.Errorf("bug %q does not name the group", e.bug)
			}
		})
	}
}

// TestEmitterReportsIllegalState: a transition FSDP2 would not make
// (here, a group starting the step unsharded with an all-gather pending,
// which its pre-forward copies out) is an internal error of the emit
// pass, not a plan. Every zoo plan makes none: TestPlanZoo plans them all.
func TestEmitterReportsIllegalState(t *testing.T) {
	e := emitterFor(t, "gpt2-124m")
	pg := &e.groups[1]
	pg.state, pg.unshardedParam = unsharded, 0
	pg.allGatherResult = allGatherResult{pending: true, out: 0, event: none}
	err := e.emit()
	if err == nil || !strings.Contains(err.Error(), "internal error") || !strings.Contains(err.Error(), "to_unsharded in state unsharded") {
		t.Fatalf("emit = %v, want an internal error naming the transition", err)
	}
}
