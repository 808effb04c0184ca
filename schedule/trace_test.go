package schedule_test

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

type traceFile struct {
	OtherData   map[string]any `json:"otherData"`
	TraceEvents []struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		ID   int            `json:"id"`
		Bp   string         `json:"bp"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

func traceZooPlan(t *testing.T, name string) *schedule.Plan {
	t.Helper()
	src, file, ok := plans.Source(name)
	if !ok {
		t.Fatalf("no zoo model %s", name)
	}
	m, err := ir.Load(file, src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writeTrace(t *testing.T, p *schedule.Plan, ranks []int) (*schedule.Simulation, traceFile, []byte) {
	t.Helper()
	model := schedule.NewModel(p)
	sim, err := schedule.Simulate(p, model)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := schedule.WriteTrace(&buf, p, sim, schedule.TraceOptions{Model: model, Ranks: ranks}); err != nil {
		t.Fatal(err)
	}
	var tf traceFile
	if err := json.Unmarshal(buf.Bytes(), &tf); err != nil {
		t.Fatalf("the trace is not JSON: %v", err)
	}
	return sim, tf, buf.Bytes()
}

// TestTraceProperties checks what makes the trace useful next to a
// PyTorch profiler trace: processes and streams named as the profiler
// names them, memory on the GPU clock, a CPU issue track, flows that bind
// to slices, and stall spans that add up to the simulator's exposed
// communication.
func TestTraceProperties(t *testing.T) {
	names := []string{"llama3-8b", "llama3-70b", "mixtral-8x7b"}
	if testing.Short() {
		names = names[:1] // .ci/run's go test runs all three
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if _, _, ok := plans.Source(name); !ok {
				t.Skipf("no zoo model %s", name)
			}
			p := traceZooPlan(t, name)
			ranks := []int{0, p.Cluster.WorldSize - 1}
			sim, tf, b := writeTrace(t, p, ranks)
			const eps = 0.01 // µs: times are written at ns resolution
			stepUS := sim.StepTime * 1e6

			type track struct{ pid, tid int }
			procNames := map[int]string{}
			threadNames := map[track]string{}
			slices := map[track][][2]float64{}
			for _, e := range tf.TraceEvents {
				switch e.Ph {
				case "M":
					switch e.Name {
					case "process_name":
						procNames[e.Pid] = e.Args["name"].(string)
					case "thread_name":
						threadNames[track{e.Pid, e.Tid}] = e.Args["name"].(string)
					}
				case "X":
					if e.Dur < 0 || e.Ts < -eps || e.Ts+e.Dur > stepUS+eps {
						t.Fatalf("slice %q [%v, +%v] µs outside the step of %v µs", e.Name, e.Ts, e.Dur, stepUS)
					}
					k := track{e.Pid, e.Tid}
					slices[k] = append(slices[k], [2]float64{e.Ts, e.Ts + e.Dur})
				}
			}
			for _, r := range ranks {
				if got, want := procNames[r], "GPU "; !strings.HasPrefix(got, want) {
					t.Errorf("rank %d: GPU process named %q, want the profiler's %q+device", r, got, want)
				}
				if got := threadNames[track{r, 7}]; !strings.HasPrefix(got, "stream 7 ") {
					t.Errorf("rank %d: the compute stream is %q, want the profiler's default stream 7", r, got)
				}
				if procNames[schedule.CPUPid(r)] == "" {
					t.Errorf("rank %d: no CPU process", r)
				}
			}

			// The CPU issue track: back-to-back launches ending when the
			// simulator says the CPU finished.
			issue := slices[track{schedule.CPUPid(0), 1}]
			if len(issue) == 0 {
				t.Fatal("no CPU issue track")
			}
			last := 0.0
			for _, s := range issue {
				if s[0] < last-eps {
					t.Fatalf("CPU issue slices overlap at %v µs", s[0])
				}
				last = s[1]
			}
			// (the step's last few allocator calls are not drawn)
			if last > sim.CPUTime*1e6+eps || last < sim.CPUTime*1e6-20 {
				t.Errorf("the CPU issue track ends at %v µs, the simulator's CPU at %v µs", last, sim.CPUTime*1e6)
			}

			// Memory on the GPU clock: samples in time order spread over
			// the step (not bunched at the CPU's first milliseconds), never
			// negative, peaking at most at the allocator's CPU-clock peak
			// plus what persists.
			var memTs []float64
			peak := 0.0
			for _, e := range tf.TraceEvents {
				if e.Ph != "C" || e.Pid != 0 || e.Name != "device memory allocated (bytes)" {
					continue
				}
				v := e.Args["total"].(float64)
				if v < 0 {
					t.Fatalf("negative memory at %v µs", e.Ts)
				}
				if len(memTs) > 0 && e.Ts < memTs[len(memTs)-1] {
					t.Fatalf("memory samples out of time order at %v µs", e.Ts)
				}
				memTs = append(memTs, e.Ts)
				peak = max(peak, v)
			}
			if len(memTs) < 3 || memTs[len(memTs)-1] < 0.5*stepUS {
				t.Errorf("memory samples end at %v µs of a %v µs step: not on the GPU clock", memTs[len(memTs)-1], stepUS)
			}
			if peak <= 0 || peak > float64(sim.PeakAllocated)*1.5 {
				t.Errorf("GPU-clock peak %v bytes against the simulator's %d", peak, sim.PeakAllocated)
			}

			// Flows: every finish has its start, later or at the same time,
			// and both ends sit inside a slice of their track.
			inSlice := func(k track, ts float64) bool {
				for _, s := range slices[k] {
					if s[0]-eps <= ts && ts <= s[1]+eps {
						return true
					}
				}
				return false
			}
			type end struct {
				cat string
				ts  float64
			}
			starts := map[int]end{}
			flows := map[string]int{}
			for _, e := range tf.TraceEvents {
				if e.Ph != "s" && e.Ph != "f" {
					continue
				}
				if !inSlice(track{e.Pid, e.Tid}, e.Ts) {
					t.Fatalf("flow %d (%s) at %v µs on pid %d tid %d binds to no slice", e.ID, e.Ph, e.Ts, e.Pid, e.Tid)
				}
				if e.Ph == "s" {
					if _, dup := starts[e.ID]; dup {
						t.Fatalf("flow id %d started twice", e.ID)
					}
					starts[e.ID] = end{e.Cat, e.Ts}
					continue
				}
				s, ok := starts[e.ID]
				if !ok || s.cat != e.Cat || s.ts > e.Ts+eps {
					t.Fatalf("flow %d finishes at %v µs without an earlier start (%+v)", e.ID, e.Ts, s)
				}
				flows[e.Cat]++
			}
			if flows["event"] == 0 || flows["ac2g"] == 0 {
				t.Errorf("flows by category %v: want record→wait and launch→kernel flows", flows)
			}

			// Wait spans on rank 0's compute stream add up to the exposed
			// communication.
			stalls := 0.0
			for _, e := range tf.TraceEvents {
				if e.Ph == "X" && e.Cat == "wait" && e.Pid == 0 && e.Tid == 7 {
					stalls += e.Dur
				}
			}
			if math.Abs(stalls-sim.ExposedComm*1e6) > 1+1e-3*stalls {
				t.Errorf("compute-stream waits %v µs, exposed communication %v µs", stalls, sim.ExposedComm*1e6)
			}

			_, _, again := writeTrace(t, p, ranks)
			if !bytes.Equal(b, again) {
				t.Error("two traces of one plan differ")
			}
		})
	}
}

// TestTraceEscapes writes names that need escaping and hostile ranks.
func TestTraceEscapes(t *testing.T) {
	p := traceZooPlan(t, "llama3-8b")
	p.Header.Model = "a\"b\\c\n</script>\x01é"
	_, tf, _ := writeTrace(t, p, nil)
	if got := tf.OtherData["model"]; got != p.Header.Model {
		t.Errorf("model name came back as %q", got)
	}
	sim, err := schedule.Simulate(p, schedule.NewModel(p))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{-1, p.Cluster.WorldSize} {
		err := schedule.WriteTrace(new(bytes.Buffer), p, sim, schedule.TraceOptions{Ranks: []int{r}})
		if err == nil || !strings.Contains(err.Error(), "rank") {
			t.Errorf("rank %d: got %v, want an error naming the rank", r, err)
		}
	}
}

// TestTraceFolds checks a trace over its budget: the repeating middle
// micro-batches become one "folded" span per track, said so in otherData,
// the rest is drawn as before (slices that do not overlap on a track,
// flows bound to slices), and fewer ranks are drawn only when folding is
// not enough. A plan within the budget is drawn whole and unchanged.
func TestTraceFolds(t *testing.T) {
	src, file, ok := plans.Source("gpt2-124m")
	if !ok {
		t.Skip("no zoo model gpt2-124m")
	}
	m, err := ir.Load(file, []byte(strings.Replace(string(src), "grad_accum = 2", "grad_accum = 6", 1)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := schedule.Simulate(p, schedule.NewModel(p))
	if err != nil {
		t.Fatal(err)
	}
	write := func(ranks []int, budget int) (traceFile, []byte) {
		var buf bytes.Buffer
		if err := schedule.WriteTrace(&buf, p, sim, schedule.TraceOptions{Ranks: ranks, MaxOps: budget}); err != nil {
			t.Fatal(err)
		}
		var tf traceFile
		if err := json.Unmarshal(buf.Bytes(), &tf); err != nil {
			t.Fatalf("the trace is not JSON: %v", err)
		}
		return tf, buf.Bytes()
	}
	n := len(p.Ops)
	if f := schedule.FoldTrace(p, 2, 2*n); f.Folded() || f.Note() != "" {
		t.Errorf("a plan within the budget folds: %+v", f)
	}
	_, whole := write([]int{0, 1}, 2*n)
	_, def := write([]int{0, 1}, 0)
	if !bytes.Equal(whole, def) {
		t.Error("a trace within the default budget differs from one drawn whole")
	}

	for _, c := range []struct {
		name   string
		budget int
		ranks  int // drawn of the 4 asked for
	}{
		{"fold", 4*n - 1, 4}, // just over: folding is enough
		{"fold and drop ranks", n, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			tf, _ := write([]int{0, 1, 2, 3}, c.budget)
			f := schedule.FoldTrace(p, 4, c.budget)
			if f.First != 2 || f.Last != 4 || f.Ranks != c.ranks {
				t.Fatalf("fold %+v, want micro-batches 2–4 folded and %d ranks", f, c.ranks)
			}
			if note, _ := tf.OtherData["folded"].(string); note == "" || note != f.Note() {
				t.Errorf("otherData.folded = %q, want %q", note, f.Note())
			}
			type track struct{ pid, tid int }
			slices := map[track][][2]float64{}
			gpus := map[int]bool{}
			drawn := map[int]bool{}
			folded := 0
			for _, e := range tf.TraceEvents {
				if e.Ph != "X" {
					continue
				}
				k := track{e.Pid, e.Tid}
				slices[k] = append(slices[k], [2]float64{e.Ts, e.Ts + e.Dur})
				if e.Pid < 1<<20 {
					gpus[e.Pid] = true
				}
				if e.Cat == "folded" {
					folded++
					if e.Args["micro_first"].(float64) < 2 || e.Args["micro_last"].(float64) > 4 {
						t.Errorf("folded span %q outside micro-batches 2–4", e.Name)
					}
				} else if mb, ok := e.Args["micro"].(float64); ok {
					drawn[int(mb)] = true
				}
			}
			if len(gpus) != c.ranks {
				t.Errorf("%d GPUs drawn, want %d", len(gpus), c.ranks)
			}
			if folded == 0 || !drawn[0] || !drawn[1] || !drawn[5] || drawn[2] || drawn[3] || drawn[4] {
				t.Errorf("%d folded spans, micro-batches drawn %v: want 0, 1 and 5 drawn, 2–4 folded", folded, drawn)
			}
			const eps = 0.01
			for k, ss := range slices {
				sort.Slice(ss, func(i, j int) bool { return ss[i][0] < ss[j][0] || ss[i][0] == ss[j][0] && ss[i][1] < ss[j][1] })
				for i := 1; i < len(ss); i++ {
					if ss[i][0] < ss[i-1][1]-eps {
						t.Fatalf("pid %d tid %d: slices [%v, %v] and [%v, %v] overlap", k.pid, k.tid, ss[i-1][0], ss[i-1][1], ss[i][0], ss[i][1])
					}
				}
			}
			for _, e := range tf.TraceEvents {
				if e.Ph != "s" && e.Ph != "f" {
					continue
				}
				bound := false
				for _, s := range slices[track{e.Pid, e.Tid}] {
					bound = bound || s[0]-eps <= e.Ts && e.Ts <= s[1]+eps
				}
				if !bound {
					t.Fatalf("flow %d (%s) at %v µs on pid %d tid %d binds to no slice", e.ID, e.Ph, e.Ts, e.Pid, e.Tid)
				}
			}
		})
	}
}
