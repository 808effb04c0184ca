package executor

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor/internal/unproven"
	"github.com/fsdpc/fsdpc/schedule"
)

// runFails runs a plan that must fail, within a deadline: a hang is a
// failure of the executor.
func runFails(t *testing.T, p *schedule.Plan, opts Options) *FailureError {
	t.Helper()
	type result struct {
		err error
	}
	done := make(chan result, 1)
	go func() {
		_, err := Run(p, NewHost(), opts)
		done <- result{err}
	}()
	select {
	case r := <-done:
		var fe *FailureError
		if !errors.As(r.err, &fe) {
			t.Fatalf("want a run failure, got %v", r.err)
		}
		return fe
	case <-time.After(opts.Timeout + 20*time.Second):
		t.Fatal("the run hung")
	}
	return nil
}

func TestDeadlockRankNeverJoins(t *testing.T) {
	p := zooPlan(t, "gpt2-124m", append(world(4), layers(2))...)
	// Rank 2 stops issuing before its third all-gather, as a crashed rank
	// would: the others wait in that collective forever.
	third := find(p, 2, isKind(schedule.OpAllGather, schedule.StreamAllGather))
	fe := runFails(t, p, Options{Scale: 64, Timeout: 300 * time.Millisecond, skip: func(rank, op int) bool { return rank == 2 && op >= third }})
	var found bool
	for _, f := range fe.Failures {
		if f.Kind != Deadlock {
			t.Errorf("a %s besides the deadlock: %v", f.Kind, f)
		}
		if f.Op == third && f.Stream == schedule.StreamAllGather && strings.Contains(f.What, "ranks 0 1 3 joined, ranks 2 never did") {
			found = true
		}
	}
	if !found {
		t.Errorf("no failure names the all-gather and the missing rank:\n%v", fe)
	}
}

func TestDeadlockEventNeverRecorded(t *testing.T) {
	p := zooPlan(t, "gpt2-124m", append(world(2), layers(2))...)
	ag := find(p, 1, isKind(schedule.OpAllGather, schedule.StreamAllGather))
	ev := p.Ops[ag+1].Event
	removeOp(p, ag+1) // the all-gather's record
	// Run refuses the plan, as fsdpc verify does; run anyway, the
	// deadlock detection finds the missing record on its own.
	if _, err := Run(p, NewHost(), Options{Scale: 64}); !errors.Is(err, ErrUnproven) || !strings.Contains(err.Error(), "is not recorded before it") {
		t.Errorf("an unproven plan: %v, want ErrUnproven with the proof's reason", err)
	}
	fe := runFails(t, p, Options{Scale: 64, Timeout: 300 * time.Millisecond, DataOnly: true, Unproven: &unproven.Permit{}})
	if fe.Failures[0].Kind != Deadlock || !strings.Contains(fe.Error(), "["+p.EventNames[ev]+"] of step 0, which is never recorded: no op of the program records it") {
		t.Errorf("want a deadlock naming the event:\n%v", fe)
	}
	// The others wait, in a chain, for records behind it.
	for _, f := range fe.Failures {
		if f.Kind != Deadlock {
			t.Errorf("a %s besides the deadlock: %v", f.Kind, f)
		}
	}
}

func TestBadInputs(t *testing.T) {
	p := zooPlan(t, "gpt2-124m", append(world(8), layers(2))...)
	// A plan for 8 ranks cannot run as 3.
	if _, err := Run(p, NewHost(), Options{Scale: 64, Ranks: 3}); !errors.Is(err, ErrWorldSize) || !strings.Contains(err.Error(), "world_size = 3") {
		t.Errorf("--ranks 3 on an 8-rank plan: %v", err)
	}
	// An inconsistent mesh.
	bad := p.Clone()
	bad.Cluster.Replicate = 3
	if _, err := Run(bad, NewHost(), Options{Scale: 64}); !errors.Is(err, ErrWorldSize) {
		t.Errorf("inconsistent mesh: %v", err)
	}
	// Too large for the memory allowed: the error suggests a scale that
	// fits, and that scale runs.
	_, err := Run(p, NewHost(), Options{MemoryLimit: 64 << 20})
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Suggest < 2 || !strings.Contains(err.Error(), "--scale") {
		t.Fatalf("a plan too large: %v", err)
	}
	if _, err := Run(p, NewHost(), Options{MemoryLimit: 64 << 20, Scale: tl.Suggest}); err != nil {
		t.Errorf("the suggested scale %d: %v", tl.Suggest, err)
	}
	// So many ranks that no scale fits.
	huge := zooPlan(t, "gpt2-124m", append(world(4096), layers(1))...)
	if _, err := Run(huge, NewHost(), Options{MemoryLimit: 64 << 20}); !errors.As(err, &tl) || tl.Suggest != 0 || !strings.Contains(err.Error(), "fewer ranks") {
		t.Errorf("4096 ranks in 64 MiB: %v", err)
	}
	// An optimizer whose state the plan does not hold.
	small := zooPlan(t, "gpt2-124m", append(world(2), layers(1), train("optimizer_state_bytes", "4"))...)
	if _, err := Run(small, NewHost(), Options{Scale: 64}); err == nil || !strings.Contains(err.Error(), "allots 4") {
		t.Errorf("adamw with 4 bytes of state: %v", err)
	}
	// Options out of range.
	if _, err := Run(p, NewHost(), Options{Scale: -1}); err == nil {
		t.Error("scale -1 accepted")
	}
}
