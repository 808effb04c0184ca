package planner

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

var update = flag.Bool("update", false, "rewrite plans/*.plan.txt from the current planner")

func TestPassOrder(t *testing.T) {
	index := map[string]int{}
	for i, p := range passes {
		if _, dup := index[p.name]; dup {
			t.Errorf("pass %q listed twice", p.name)
		}
		index[p.name] = i
		if !p.required || p.fn == nil || p.doc == "" {
			t.Errorf("pass %q: every pass is required, has a function and a description", p.name)
		}
	}
	for _, c := range passOrder {
		b, okB := index[c.before]
		a, okA := index[c.after]
		if !okB || !okA {
			t.Errorf("passOrder names an unknown pass: %s, %s", c.before, c.after)
			continue
		}
		if b >= a {
			t.Errorf("pass %q must run before %q: %s", c.before, c.after, c.reason)
		}
	}
}

func TestDumpAfterEveryPass(t *testing.T) {
	var got []string
	m := loadZoo(t, "gpt2-124m")
	_, err := Plan(m, Options{CheckEveryPass: true, DumpAfter: func(pass, text string) {
		got = append(got, pass)
		if text == "" {
			t.Errorf("empty dump after %s", pass)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != strings.Join(PassNames(), " ") {
		t.Errorf("dumped after %v, want %v", got, PassNames())
	}
}

func planText(t testing.TB, name string) []byte {
	t.Helper()
	p, err := Plan(loadZoo(t, name), Options{CheckEveryPass: true})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := schedule.WriteText(&b, p); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGoldenPlans compares every zoo model's plan with the reviewed copy in
// plans/. After an intended planner change, run
// go test ./planner -run TestGoldenPlans -update and review the diff.
func TestGoldenPlans(t *testing.T) {
	for _, name := range plans.Names() {
		t.Run(name, func(t *testing.T) {
			got := planText(t, name)
			path := filepath.Join("..", "plans", name+".plan.txt")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./planner -run TestGoldenPlans -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("plan of %s differs from %s: the golden plan is stale; review the change and run go test ./planner -run TestGoldenPlans -update\n%s",
					name, path, firstDiff(want, got))
			}
		})
	}
	// Every golden plan belongs to a zoo model.
	files, _ := filepath.Glob(filepath.Join("..", "plans", "*.plan.txt"))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".plan.txt")
		if _, _, ok := plans.Source(name); !ok {
			t.Errorf("%s has no zoo model %s.toml", f, name)
		}
	}
}

func firstDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + strconv.Itoa(i+1) + ":\n- " + w + "\n+ " + g
		}
	}
	return ""
}

func mustLoadText(t testing.TB, file, text string) *ir.Model {
	t.Helper()
	m, err := ir.Load(file, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDeterministic plans every zoo model under GOMAXPROCS 1 and 8 and
// requires byte-identical text.
func TestDeterministic(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, name := range plans.Names() {
		runtime.GOMAXPROCS(1)
		a := planText(t, name)
		runtime.GOMAXPROCS(8)
		b := planText(t, name)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: plans differ between GOMAXPROCS 1 and 8:\n%s", name, firstDiff(a, b))
		}
	}
}

// BenchmarkPlan405B plans llama3.1-405b for 16,384 GPUs (HSDP 64 × 256).
func BenchmarkPlan405B(b *testing.B) {
	src, file, _ := plans.Source("llama3.1-405b")
	text := strings.Replace(string(src), "world_size = 512", "world_size = 16384", 1)
	text = strings.Replace(text, "replicate = 2", "replicate = 64", 1)
	m := mustLoadText(b, file, text)
	if m.Cluster.WorldSize != 16384 {
		b.Fatalf("world size %d: the zoo file changed shape", m.Cluster.WorldSize)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Plan(m, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPassTimes: every pass is timed once a plan, and over a tune every
// candidate's passes add up (concurrently planned ones included).
func TestPassTimes(t *testing.T) {
	var times PassTimes
	if _, err := Compile(loadZoo(t, "gpt2-124m"), Options{Times: &times}); err != nil {
		t.Fatal(err)
	}
	for _, p := range passes {
		if times.Runs(p.name) != 1 || times.Total(p.name) <= 0 {
			t.Errorf("pass %s: %d runs, %v", p.name, times.Runs(p.name), times.Total(p.name))
		}
	}
	var tuned PassTimes
	tu, err := Tune(loadZoo(t, "gpt2-124m"), TuneOptions{Times: &tuned})
	if err != nil {
		t.Fatal(err)
	}
	if n := tuned.Runs("predict"); n < 2 || n > tu.Evaluated+1 {
		t.Errorf("predict ran %d times over a tune of %d candidates", n, tu.Evaluated)
	}
	var b strings.Builder
	tuned.Write(&b)
	for _, p := range passes {
		if !strings.Contains(b.String(), "\n"+p.name+" ") {
			t.Errorf("the table lacks pass %s:\n%s", p.name, b.String())
		}
	}
}
