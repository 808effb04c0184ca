package gpu_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/executor/gpu/gputest"
	"github.com/fsdpc/fsdpc/executor/internal/unproven"
	"github.com/fsdpc/fsdpc/internal/zootest"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// plan compiles a zoo model with its repeated blocks cut to layers and
// the cluster set to world ranks (mesh r × s when r > 1).
func plan(t testing.TB, name string, layers, r, s int, extra ...string) *schedule.Plan {
	t.Helper()
	edits := append([]zootest.Edit{zootest.Layers(layers)}, zootest.HSDP(r, s)...)
	for _, e := range extra {
		section, kv, _ := strings.Cut(e, ":")
		key, value, _ := strings.Cut(kv, "=")
		edits = append(edits, zootest.Set(section, strings.TrimSpace(key), strings.TrimSpace(value)))
	}
	p, err := planner.Plan(zootest.Model(t, name, edits...), planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func rehearse(t *testing.T, p *schedule.Plan, scale, steps int, opt gpu.Options, dev gpu.Device) (*executor.Report, *gpu.Backend, error) {
	t.Helper()
	b := gpu.New(dev, opt)
	rep, err := executor.Run(p, b, executor.Options{Scale: scale, Steps: steps, Timeout: 20 * time.Second})
	return rep, b, err
}

// rehearsalCase is a zoo model cut to layers on an r × s mesh, run at
// scale, with extra policy or training keys.
type rehearsalCase struct {
	model        string
	layers, r, s int
	scale        int
	extra        []string
}

func (c rehearsalCase) String() string {
	return fmt.Sprintf("%s %dx%d %v", c.model, c.r, c.s, c.extra)
}

// rehearsalCases are the configurations every rehearsal test covers.
var rehearsalCases = []rehearsalCase{
	{"gpt2-124m", 2, 1, 4, 16, nil},
	{"gpt2-124m", 2, 1, 3, 16, nil},
	{"llama3-8b", 2, 1, 8, 64, nil},
	{"llama3-8b", 2, 2, 4, 64, nil},
	{"llama3-8b", 2, 1, 4, 64, []string{`policy:reshard_after_forward = 2`}},
	{"llama3-8b-lora", 1, 1, 2, 64, nil},
	{"mixtral-8x7b", 1, 1, 4, 64, nil},
	{"t5-base", 1, 1, 2, 16, nil},
	{"vit-b16", 1, 1, 2, 16, nil},
	{"llama3-8b", 1, 1, 4, 64, []string{`train:grad_accum = 2`}},
	{"llama3-8b", 1, 1, 2, 64, []string{`policy:reduce_dtype = "fp16"`}},
}

// shortCases is rehearsalCases for tests that replay several steps per
// case: under -short, the cheaper cases that still cover uneven shards,
// HSDP, an intermediate reshard size, frozen parameters and accumulation;
// .ci/run runs every case.
func shortCases() []rehearsalCase {
	if !testing.Short() {
		return rehearsalCases
	}
	var cs []rehearsalCase
	for _, i := range []int{1, 3, 4, 5, 9} {
		cs = append(cs, rehearsalCases[i])
	}
	return cs
}

// TestRehearsalZoo runs zoo plans as virtual ranks on the CPU device with
// its race detection on: every gathered parameter and every collective
// passes the data check, the device sees no unordered access, and each
// pool's peak equals the prediction (Run fails otherwise). Under -short,
// shortCases.
func TestRehearsalZoo(t *testing.T) {
	for _, c := range shortCases() {
		t.Run(c.String(), func(t *testing.T) {
			p := plan(t, c.model, c.layers, c.r, c.s, c.extra...)
			dev := gputest.New(gputest.WithRaceDetection())
			defer dev.Close()
			rep, b, err := rehearse(t, p, c.scale, 2, gpu.Options{CheckSteps: 1}, dev)
			if err != nil {
				var sb strings.Builder
				if rep != nil {
					rep.Write(&sb)
				}
				t.Fatalf("%v\n%s", err, sb.String())
			}
			if errs := dev.Errors(); len(errs) > 0 {
				t.Fatalf("the device saw: %v", errs)
			}
			gathered, colls, _ := b.Checked()
			if gathered == 0 || colls == 0 {
				t.Errorf("the data check covered %d gathers and %d collectives", gathered, colls)
			}
			m := b.Measurement()
			if !(m.Measured.StepTime > 0) || m.Timings == nil {
				t.Errorf("no measured step: %+v", m.Measured)
			}
		})
	}
}

// brokenReduce is a device whose reduction kernel drops the last input.
type brokenReduce struct{ *gputest.Device }

func (d brokenReduce) Reduce(dst gpu.Ptr, srcs []gpu.Ptr, n int64, dt ir.DType, scale float32, s gpu.Stream) error {
	return d.Device.Reduce(dst, srcs[:len(srcs)-1], n, dt, scale, s)
}

// brokenGather is a device whose copies of one size lose their last byte.
type brokenCopy struct {
	*gputest.Device
	size int64
}

func (d brokenCopy) Copy(dst, src gpu.Ptr, bytes int64, s gpu.Stream) error {
	if bytes == d.size {
		bytes--
	}
	return d.Device.Copy(dst, src, bytes, s)
}

// TestDataCheckCatches: a wrong reduction and a short copy fail the run
// with a mismatch that names the collective or the parameter.
func TestDataCheckCatches(t *testing.T) {
	p := plan(t, "gpt2-124m", 1, 1, 4)
	t.Run("reduction", func(t *testing.T) {
		dev := gputest.New()
		defer dev.Close()
		_, _, err := rehearse(t, p, 16, 1, gpu.Options{CheckSteps: 1}, brokenReduce{dev})
		wantMismatch(t, err, "reduce-scatter on rank")
	})
	t.Run("copy", func(t *testing.T) {
		dev := gputest.New()
		defer dev.Close()
		// Every all-gather copy of the first group moves one chunk: find
		// its size from the plan.
		q, _, err := executor.Scale(p, 16)
		if err != nil {
			t.Fatal(err)
		}
		var chunk int64
		for _, o := range q.Ops {
			if o.Kind == schedule.OpAllGather {
				chunk = o.Bytes / int64(o.PGSize)
				break
			}
		}
		_, _, err = rehearse(t, p, 16, 1, gpu.Options{CheckSteps: 1}, brokenCopy{dev, chunk})
		wantMismatch(t, err, "")
	})
}

func wantMismatch(t *testing.T, err error, what string) {
	t.Helper()
	var fe *executor.FailureError
	if !errors.As(err, &fe) {
		t.Fatalf("want a failed run, got %v", err)
	}
	if fe.Failures[0].Kind != executor.Mismatch || !strings.Contains(fe.Failures[0].What, what) {
		t.Fatalf("want a mismatch naming %q, got %v", what, err)
	}
}

// TestMissingWaitIsAHazard removes the compute stream's wait for a group's
// all-gather: the device's race detection (what compute-sanitizer's
// racecheck finds on a GPU) or the data check must fail the run.
func TestMissingWaitIsAHazard(t *testing.T) {
	p := plan(t, "gpt2-124m", 1, 1, 2)
	var removed bool
	for i, o := range p.Ops {
		if o.Kind == schedule.OpWait && o.Stream == schedule.StreamCompute && o.Phase == schedule.PhaseForward {
			p.Ops = append(p.Ops[:i:i], p.Ops[i+1:]...)
			removed = true
			break
		}
	}
	if !removed {
		t.Fatal("no compute-stream wait in the forward")
	}
	dev := gputest.New(gputest.WithRaceDetection())
	defer dev.Close()
	// executor.Run refuses the plan, as fsdpc verify does.
	if _, _, err := rehearse(t, p, 16, 1, gpu.Options{CheckSteps: 0}, dev); !errors.Is(err, executor.ErrUnproven) {
		t.Fatalf("a schedule without its wait: %v, want executor.ErrUnproven", err)
	}
	// Run anyway: the device's race detection catches it on its own.
	// Unchecked: the data check synchronises the host with the streams,
	// which orders them after all.
	_, err := executor.Run(p, gpu.New(dev, gpu.Options{CheckSteps: 0}), executor.Options{Scale: 16, Steps: 1, Timeout: 20 * time.Second, Unproven: &unproven.Permit{}})
	if err == nil || !strings.Contains(err.Error(), "hazard: stream") {
		t.Fatalf("a schedule without its wait: want the device's hazard, got %v", err)
	}
}

// TestPacedCollectives: pacing the virtual ranks' links to a bandwidth
// makes the collectives take at least the bytes over it.
func TestPacedCollectives(t *testing.T) {
	p := plan(t, "gpt2-124m", 1, 1, 2)
	dev := gputest.New()
	defer dev.Close()
	const bw = 2e9
	_, b, err := rehearse(t, p, 16, 2, gpu.Options{LinkBandwidth: bw}, dev)
	if err != nil {
		t.Fatal(err)
	}
	m := b.Measurement()
	for _, c := range m.Collectives {
		if c.BusBW > bw*1.05 {
			t.Errorf("%s: bus bandwidth %.2f GB/s over the %.2f GB/s link", c.Kind, c.BusBW/1e9, bw/1e9)
		}
	}
	if len(m.Collectives) == 0 {
		t.Fatal("no collectives measured")
	}
}

func TestCalibrate(t *testing.T) {
	dev := gputest.New()
	defer dev.Close()
	f, err := gpu.Calibrate(dev, 4, 1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !(f.CopyBandwidth > 0 && f.GatherBandwidth > 0 && f.ReduceBandwidth > 0 && f.Launch >= 0 && f.Issue > 0) {
		t.Errorf("figures %+v", f)
	}
	var sb strings.Builder
	f.Write(&sb)
	if !strings.Contains(sb.String(), "% of copy") {
		t.Errorf("report:\n%s", sb.String())
	}
}

// TestReduceHost pins the reduction's arithmetic: fp32 accumulation in
// input order, each input scaled and rounded to fp32 first, one rounding
// to the dtype.
func TestReduceHost(t *testing.T) {
	enc := func(dt ir.DType, vs ...float64) []byte {
		b := make([]byte, int64(len(vs))*dt.Size())
		for i, v := range vs {
			executor.StoreElement(dt, b, int64(i), v)
		}
		return b
	}
	// bf16: 1 + 2^-8 + 2^-8 is not representable per step (bf16 has 8
	// significant bits) but is after accumulating in fp32: 1 + 2^-7.
	in := [][]byte{enc(ir.BF16, 1), enc(ir.BF16, 1.0/256), enc(ir.BF16, 1.0/256)}
	got := executor.LoadElement(ir.BF16, gpu.ReduceHost(in, 1, ir.BF16, 1), 0)
	if got != 1+1.0/128 {
		t.Errorf("bf16 sum = %v, want %v", got, 1+1.0/128)
	}
	// The average's scale applies to each input before the sum.
	in = [][]byte{enc(ir.FP32, 3), enc(ir.FP32, 5)}
	if got := executor.LoadElement(ir.FP32, gpu.ReduceHost(in, 1, ir.FP32, 0.5), 0); got != 4 {
		t.Errorf("fp32 avg = %v, want 4", got)
	}
}

// TestGraphReplay captures a step and replays it for every rehearsal
// configuration: the replays run on the device without a hazard (the
// first replay must be ordered after the eager step's work on every
// stream, which capture alone does not do), and the report compares them
// with the eager step. A plan whose CPU waits for the device (offload)
// must be refused.
func TestGraphReplay(t *testing.T) {
	for _, c := range shortCases() {
		t.Run(c.String(), func(t *testing.T) {
			p := plan(t, c.model, c.layers, c.r, c.s, c.extra...)
			dev := gputest.New(gputest.WithRaceDetection())
			defer dev.Close()
			_, b, err := rehearse(t, p, c.scale, 5, gpu.Options{CheckSteps: 1, Graph: true}, dev)
			if err != nil {
				if strings.Contains(err.Error(), "cannot capture a step whose CPU waits") {
					return
				}
				t.Fatal(err)
			}
			if errs := dev.Errors(); len(errs) > 0 {
				t.Fatalf("the device saw: %v", errs)
			}
			m := b.Measurement()
			if m.Graph == nil || m.Graph.Replays != 3 || dev.Stats().GraphLaunches != 3 {
				t.Fatalf("graph figures %+v, launches %d; want 3 replays (steps 2, 3, 4)", m.Graph, dev.Stats().GraphLaunches)
			}
			if m.Step != 1 {
				t.Errorf("measured step %d, want the eager step 1", m.Step)
			}
			var sb strings.Builder
			m.Write(&sb)
			if !strings.Contains(sb.String(), "launch overhead saved") {
				t.Errorf("report:\n%s", sb.String())
			}
		})
	}
	p := plan(t, "llama3-8b", 2, 1, 4)
	// Too few steps, and a plan whose CPU waits for the device.
	dev2 := gputest.New()
	defer dev2.Close()
	if _, _, err := rehearse(t, p, 64, 2, gpu.Options{CheckSteps: 1, Graph: true}, dev2); err == nil || !strings.Contains(err.Error(), "needs at least 3 steps") {
		t.Errorf("two steps: %v", err)
	}
}

// eventCounter counts the events made.
type eventCounter struct {
	gpu.Device
	events atomic.Int64
}

func (d *eventCounter) NewEvent() (gpu.Event, error) {
	d.events.Add(1)
	return d.Device.NewEvent()
}

func (d *eventCounter) NewSyncEvent() (gpu.Event, error) {
	d.events.Add(1)
	return d.Device.NewSyncEvent()
}

// TestDrainReusesEvents: a second Drain makes no event: its events are
// made once per stream (issue 29, N10: Drain made one per stream per
// call, never freed).
func TestDrainReusesEvents(t *testing.T) {
	fake := gputest.New()
	defer fake.Close()
	dev := &eventCounter{Device: fake}
	_, b, err := rehearse(t, plan(t, "gpt2-124m", 1, 1, 2), 64, 2, gpu.Options{CheckSteps: 1}, dev)
	if err != nil {
		t.Fatal(err)
	}
	before := dev.events.Load()
	if err := b.Drain(); err != nil {
		t.Fatal(err)
	}
	if n := dev.events.Load() - before; n != 0 {
		t.Errorf("a second Drain made %d events", n)
	}
}

// TestUnmeasuredSteps: the steps between the data check and the measured
// step, which carry no per-op events, are timed as a whole and reported
// beside the measured step (issue 29, N4).
func TestUnmeasuredSteps(t *testing.T) {
	fake := gputest.New()
	defer fake.Close()
	_, b, err := rehearse(t, plan(t, "gpt2-124m", 1, 1, 2), 64, 5, gpu.Options{CheckSteps: 1}, fake)
	if err != nil {
		t.Fatal(err)
	}
	m := b.Measurement()
	if m.UnmeasuredSteps != 3 || !(m.Unmeasured > 0) {
		t.Fatalf("unmeasured: %d steps, %v s a step; want steps 1–3 timed", m.UnmeasuredSteps, m.Unmeasured)
	}
	// Each step's work is the same: the mean is of the order of the
	// measured step (not a timing check; a factor of 10 either way).
	if r := m.Unmeasured / m.Measured.StepTime; r < 0.1 || r > 10 {
		t.Errorf("unmeasured %.3f ms a step against the measured %.3f ms", m.Unmeasured*1e3, m.Measured.StepTime*1e3)
	}
	// The measured step's device calls price its issue: more than one per
	// op (the measured step records two timing events per op; 1.85 here),
	// and a prediction that charges them.
	if m.CallsPerOp <= 1 || !(m.PredictedIssued > m.Predicted.StepTime) {
		t.Errorf("%.2f calls per op, step predicted at %v s issuing them against %v s issuing one", m.CallsPerOp, m.PredictedIssued, m.Predicted.StepTime)
	}
	// Exposed communication per collective kind, measured and predicted,
	// within each kind's own time.
	if len(m.Collectives) == 0 {
		t.Fatal("no collectives measured")
	}
	for _, c := range m.Collectives {
		if c.Exposed < 0 || c.Exposed > c.Time+1e-9 || c.PredExposed < 0 || c.PredExposed > c.Predicted+1e-9 {
			t.Errorf("%s: exposed %v of %v s measured, %v of %v predicted", c.Kind, c.Exposed, c.Time, c.PredExposed, c.Predicted)
		}
	}
	var sb strings.Builder
	m.Write(&sb)
	if !strings.Contains(sb.String(), "  exposed") {
		t.Errorf("the report lacks the exposed time per collective:\n%s", sb.String())
	}
	if !strings.Contains(sb.String(), "issue at ") {
		t.Errorf("the report lacks the issue-priced prediction:\n%s", sb.String())
	}
	if !strings.Contains(sb.String(), "steps 1–3, no events") {
		t.Errorf("the report lacks the unmeasured steps:\n%s", sb.String())
	}
}

// TestAllocatorLikeForLike: the backend's pools reserve exactly what the
// model of their own policy says, on every rehearsal configuration and
// scale, where the simulator's caching-allocator prediction differs by
// a ratio that moves with the scale (issue 29, N5).
func TestAllocatorLikeForLike(t *testing.T) {
	for _, c := range rehearsalCases[:3] {
		t.Run(c.String(), func(t *testing.T) {
			fake := gputest.New()
			defer fake.Close()
			_, b, err := rehearse(t, plan(t, c.model, c.layers, c.r, c.s, c.extra...), c.scale, 2, gpu.Options{CheckSteps: 1}, fake)
			if err != nil {
				t.Fatal(err)
			}
			m := b.Measurement()
			if m.AllocatorModel == 0 || m.AllocatorReserved != m.AllocatorModel {
				t.Errorf("the pools reserved %d bytes, their policy's model %d", m.AllocatorReserved, m.AllocatorModel)
			}
			t.Logf("reserved %d bytes; against the simulator's caching allocator %.3f×", m.AllocatorReserved, float64(m.AllocatorReserved)/float64(m.Predicted.PeakMemory))
		})
	}
}

// TestTimingEventsOnlyWhereMeasured: the only events with timing are the
// measured step's two per op, its base, and the step-entry marks; every
// event that only orders (the plan's, the collectives', the data check's,
// Drain's) is made without timing, which is cheaper to record (issue 29,
// N10).
func TestTimingEventsOnlyWhereMeasured(t *testing.T) {
	fake := gputest.New()
	defer fake.Close()
	p := plan(t, "gpt2-124m", 1, 1, 2)
	const steps = 4
	if _, _, err := rehearse(t, p, 64, steps, gpu.Options{CheckSteps: 1}, fake); err != nil {
		t.Fatal(err)
	}
	st := fake.Stats()
	ranks := int64(p.Cluster.WorldSize)
	// At most two per op and rank, one base, and a mark per step from the
	// first unchecked one to the measured one.
	limit := 2*int64(len(p.Ops))*ranks + 1 + (steps - 1)
	if st.TimingEvents > limit || st.TimingEvents == 0 {
		t.Errorf("%d events with timing (of %d), want at most %d", st.TimingEvents, st.Events, limit)
	}
	if st.Events-st.TimingEvents < ranks*int64(p.Events) {
		t.Errorf("%d events without timing: the plan's events alone are %d per rank", st.Events-st.TimingEvents, p.Events)
	}
}

// reduceRecorder records whether each Reduce could run in 16-byte words:
// dst and every source at the same offset modulo 16.
type reduceRecorder struct {
	gpu.Device
	mu            sync.Mutex
	vector, calls int
}

func (d *reduceRecorder) Reduce(dst gpu.Ptr, srcs []gpu.Ptr, n int64, dt ir.DType, scale float32, s gpu.Stream) error {
	ok := true
	for _, p := range srcs {
		ok = ok && p%16 == dst%16
	}
	d.mu.Lock()
	d.calls++
	if ok {
		d.vector++
	}
	d.mu.Unlock()
	return d.Device.Reduce(dst, srcs, n, dt, scale, s)
}

// TestReduceScatterChunksVectorise: llama3-8b on three ranks at scale 64
// has reduce-scatter chunks that start at offsets not a multiple of 16
// bytes (3 of its 18 reductions); every reduction still has its target
// congruent with its sources, so the kernel's 16-byte path runs (issue
// 29, N10), and the data check and the race detector pass.
func TestReduceScatterChunksVectorise(t *testing.T) {
	fake := gputest.New(gputest.WithRaceDetection())
	defer fake.Close()
	dev := &reduceRecorder{Device: fake}
	if _, _, err := rehearse(t, plan(t, "llama3-8b", 1, 1, 3), 64, 3, gpu.Options{CheckSteps: 2}, dev); err != nil {
		t.Fatal(err)
	}
	if errs := fake.Errors(); len(errs) > 0 {
		t.Fatalf("device: %v", errs[0])
	}
	if dev.calls == 0 || dev.vector != dev.calls {
		t.Errorf("%d of %d reductions have a target congruent with their sources", dev.vector, dev.calls)
	}
}
