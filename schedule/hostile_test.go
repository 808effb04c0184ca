package schedule_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	. "github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/schedule/diff"
)

// The hostile-input corpus for plan.bin (issue 14, item 6): what a
// corrupted or forged file can do to every command that reads one. A
// CRC-valid bit flip is the worst case of corruption, since the checksum
// cannot catch it, and a forged file is one made to look right.

// sweepFlips is how many bit flips TestBitFlipSweep samples from
// gpt2-124m's plan (about 487,000 bits in its sections). The sample is
// fixed by the seed, so a failure reproduces; every check is cheap enough
// that the sweep takes seconds, not the ten minutes of all flips.
const (
	sweepFlips = 1500
	sweepSeed  = 14
	// sweepRuns is how many of the flipped plans Verify calls safe are
	// also run on the host executor (each a fraction of a second at scale
	// 64): what Verify proves must hold when the plan runs.
	sweepRuns = 12
)

// TestBitFlipSweep flips one bit at a time in gpt2-124m's plan.bin,
// recomputes the checksum and follows the file through everything that
// reads plans: decode (Check), show's text, diff against the original,
// the simulator, Verify, and for a sample of what Verify accepts, the
// host executor. Nothing may panic; a decoded file re-encodes to its own
// bytes, so it is a different plan and diff must say how; and a plan
// Verify calls safe must run without a hazard, a mismatch or a deadlock.
func TestBitFlipSweep(t *testing.T) {
	base := zooPlanNamed(t, "gpt2-124m")
	flips := sweepFlips
	if testing.Short() {
		flips /= 5
	}
	rng := rand.New(rand.NewPCG(sweepSeed, 0))
	const sections = 16 // after magic, version and size; before the checksum
	var accepted, verified, runs int
	var refusedBy = map[string]int{}
	for range flips {
		bit := sections*8 + rng.IntN((len(base.bin)-sections-4)*8)
		b := bytes.Clone(base.bin)
		b[bit/8] ^= 1 << (bit % 8)
		b = reseal(b)
		what := fmt.Sprintf("bit %d (byte %d)", bit, bit/8)
		stage, p, verr := hostileReaders(t, what, base.plan, b)
		if p == nil {
			refusedBy[stage]++
			continue
		}
		accepted++
		if verr != nil {
			continue
		}
		verified++
		if runs < sweepRuns {
			runs++
			mustRunSafely(t, what, p)
		}
	}
	t.Logf("%d flips of %d bits: %d refused by decode, %d accepted (%d of them verified safe, %d run)",
		flips, (len(base.bin)-sections-4)*8, refusedBy["decode"], accepted, verified, runs)
	if accepted == 0 || verified == 0 || runs == 0 {
		t.Errorf("the sample reaches no accepted or verified plan: it tests nothing past decode")
	}
}

// hostileReaders runs what every command does with a plan.bin: it returns
// the decoded plan (nil if refused) and Verify's verdict, failing the test
// on a panic, an unclassified refusal, a non-canonical decode or a diff
// that calls a different plan identical.
func hostileReaders(t *testing.T, what string, base *Plan, b []byte) (stage string, p *Plan, verr error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s: %s panicked: %v\n%s", what, stage, r, debug.Stack())
		}
	}()
	stage = "decode"
	p, err := Decode(b)
	if err != nil {
		if !classified(err) || errors.Is(err, ErrInternal) {
			t.Errorf("%s: refused with an error of no class: %v", what, err)
		}
		return stage, nil, nil
	}
	stage = "encode"
	again, err := Encode(p)
	// An older version re-encodes as the current one; only the current
	// version's encoding is canonical byte for byte.
	if err != nil || binary.LittleEndian.Uint32(b[4:]) == FormatVersion && !bytes.Equal(again, b) {
		t.Errorf("%s: decoded, but re-encodes differently (%v)", what, err)
	}
	stage = "text"
	if err := WriteText(io.Discard, p); err != nil {
		t.Errorf("%s: show: %v", what, err)
	}
	stage = "diff"
	d := diff.Compare("original", base, "flipped", p)
	diff.Text(io.Discard, d, false)
	if d.Identical && !bytes.Equal(again, mustEncode(t, base)) {
		t.Errorf("%s: diff calls the flipped plan identical to the original; it differs at %s", what,
			firstDiff(reflect.ValueOf(base).Elem(), reflect.ValueOf(p).Elem(), "Plan"))
	}
	stage = "sim"
	if sim, err := Simulate(p, NewModel(p)); err == nil {
		_ = sim.Prediction()
	}
	stage = "verify"
	return stage, p, Verify(p)
}

func classified(err error) bool {
	for _, class := range errorClasses {
		if errors.Is(err, class) {
			return true
		}
	}
	return false
}

func mustEncode(t testing.TB, p *Plan) []byte {
	t.Helper()
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustRunSafely runs a plan Verify accepted on the host executor: it may
// refuse to run it (a setting the host backend does not implement), but
// it must not find a hazard, a wrong number or a deadlock, or panic.
func mustRunSafely(t *testing.T, what string, p *Plan) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s: the executor panicked on a verified plan: %v\n%s", what, r, debug.Stack())
		}
	}()
	_, err := executor.Run(p, executor.NewHost(), executor.Options{Scale: 64, Timeout: time.Minute})
	var fails *executor.FailureError
	if errors.As(err, &fails) {
		t.Errorf("%s: Verify calls the plan safe, but running it fails: %v", what, err)
	}
}

func zooPlanNamed(t *testing.T, name string) zooPlan {
	t.Helper()
	for _, z := range zoo(t) {
		if z.name == name {
			return z
		}
	}
	t.Fatalf("no zoo plan %s", name)
	return zooPlan{}
}

// TestForgedPlansEverywhere takes each forgery of forged_test.go through
// everything that reads a plan.bin: a forgery that breaks Check is refused
// by the reader (ErrInvalidPlan); the others decode, show, diff (never
// identical to the original), simulate and run on the executor without a
// panic, and schedule.Prove (what verify reports and run requires)
// refuses every one.
func TestForgedPlansEverywhere(t *testing.T) {
	base := zooPlanNamed(t, "gpt2-124m")
	for _, f := range forgeries {
		t.Run(f.name, func(t *testing.T) {
			p := base.plan.Clone()
			f.forge(t, p)
			b, err := EncodeUnchecked(p)
			if err != nil {
				t.Fatalf("the forgery does not encode: %v", err)
			}
			if cerr := Check(p); cerr != nil {
				_, err := Decode(b)
				if !errors.Is(err, ErrInvalidPlan) {
					t.Errorf("decode = %v, want ErrInvalidPlan", err)
				}
				// A problem with an op is located at the op's bytes.
				var ce *CheckError
				if errors.As(cerr, &ce) && ce.Op >= 0 {
					tr, terr := TraceUnchecked(p)
					if terr != nil {
						t.Fatal(terr)
					}
					field := fmt.Sprintf("Ops[%d]", ce.Op)
					start, _ := fieldAt(t, tr, field+".Kind")
					var fe *FormatError
					if !errors.As(err, &fe) || fe.Field != field || fe.Offset != start {
						t.Errorf("decode = %v, want an error at byte %d (%s)", err, start, field)
					}
				}
				return
			}
			_, q, verr := hostileReaders(t, f.name, base.plan, b)
			if q == nil {
				t.Fatal("a forgery Check accepts was refused by decode")
			}
			if verr == nil {
				t.Fatal("Verify accepts the forgery")
			}
			if _, err := Prove(q); err == nil {
				t.Error("Prove accepts the forgery")
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("the executor panicked: %v\n%s", r, debug.Stack())
					}
				}()
				executor.Run(q, executor.NewHost(), executor.Options{Scale: 64, Timeout: time.Minute})
			}()
		})
	}
}

// FuzzDecodePlan: whatever the bytes, every reader of plan.bin holds:
// decode refuses with a classified error or accepts a canonical plan, and
// then show, diff (a plan is identical to itself and to nothing else),
// the simulator, Verify and Prove run without a panic, and a plan Verify
// accepts runs on the host executor without a hazard, mismatch or
// deadlock. Seeds: testdata/fuzz/FuzzDecodePlan (regenerate with
// go test ./schedule -run TestFuzzDecodePlanSeeds -update), the pinned
// fixture and the zoo plans cut to 20 ops. Run it outside CI with
// go test -run X -fuzz FuzzDecodePlan -fuzztime 5m ./schedule/
func FuzzDecodePlan(f *testing.F) {
	// As FuzzDecode: Go's minimizer is quadratic in the input's length,
	// and each execution here runs every reader, so cap it.
	explicit := false
	flag.Visit(func(fl *flag.Flag) { explicit = explicit || fl.Name == "test.fuzzminimizetime" })
	if !explicit {
		if err := flag.Set("test.fuzzminimizetime", "2000x"); err != nil {
			f.Fatal(err)
		}
	}
	for _, z := range zoo(f) {
		b, err := Encode(cut(z.plan, 20))
		if err != nil {
			f.Fatalf("%s cut to 20 ops: %v", z.name, err)
		}
		f.Add(b)
	}
	f.Add(mustEncode(f, tinyPlan()))
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzReaders(t, b)
		if len(b) >= 20 {
			fuzzReaders(t, reseal(b)) // past the checksum, into the sections
		}
	})
}

func fuzzReaders(t *testing.T, b []byte) {
	_, p, verr := hostileReaders(t, "the input", tinyPlan(), b)
	if p == nil {
		return
	}
	if d := diff.Compare("a", p, "b", p); !d.Identical {
		t.Errorf("diff: a plan differs from itself")
	}
	if _, err := Prove(p); verr != nil && err == nil {
		t.Errorf("Prove accepts a plan Verify refuses")
	}
	if verr == nil {
		mustRunSafely(t, "the input", p)
	}
}

// fuzzPlanSeeds are the committed seeds of FuzzDecodePlan: small plans
// that reach the dataflow checks (whole zoo plans make each execution
// slow) and near misses of them.
func fuzzPlanSeeds(t *testing.T) map[string][]byte {
	gpt2 := zooPlanNamed(t, "gpt2-124m").plan
	small := cut(gpt2, 30)
	seeds := map[string][]byte{
		"tiny":        mustEncode(t, tinyPlan()),
		"gpt2-cut-30": mustEncode(t, small),
	}
	forged := small.Clone()
	for i := range forged.Ops {
		if forged.Ops[i].Kind == OpCopyOut {
			forged.Ops[i].Micro = int32(forged.Train.GradAccum) // past grad_accum: Check refuses it
			break
		}
	}
	b, err := EncodeUnchecked(forged)
	if err != nil {
		t.Fatal(err)
	}
	seeds["gpt2-cut-30-micro-past-grad-accum"] = b
	dropped := small.Clone()
	for i := range dropped.Ops {
		if dropped.Ops[i].Kind == OpAllGather {
			dropped.Ops = append(dropped.Ops[:i], dropped.Ops[i+1:]...)
			break
		}
	}
	seeds["gpt2-cut-30-all-gather-dropped"] = mustEncode(t, dropped)
	return seeds
}

// TestFuzzDecodePlanSeeds writes the committed seed corpus with -update.
// Without it, it checks every seed is there; a planner change that makes
// gpt2-124m's plan differ leaves them older but still good seeds, so
// their bytes are not compared.
func TestFuzzDecodePlanSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodePlan")
	for name, data := range fuzzPlanSeeds(t) {
		path := filepath.Join(dir, name)
		if *update {
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%v: go test ./schedule -run TestFuzzDecodePlanSeeds -update", err)
		}
	}
}
