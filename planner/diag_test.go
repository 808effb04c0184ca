package planner

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/internal/zootest"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// TestPositionedDiagnostics: the planner's errors are ir.Diagnostics placed
// at the module, parameter or policy entry they are about, every
// independent problem of a pass reported together (the instances of a
// repeated block as one); its warnings are placed too. Each case lists the
// whole output, one diagnostic per line with its notes, as the CLI prints
// it.
func TestPositionedDiagnostics(t *testing.T) {
	const head = "[train]\nseq_len = 4\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 2\n" // lines 1-5
	for _, tc := range []struct {
		name, model string
		errs        []string // the error's lines; nil: the plan is made
		warns       []string
	}{
		{
			// Two children of a checkpointed block: one error per child,
			// not one per instance of the block.
			name: "units inside checkpoint regions",
			model: strings.Replace(head, "seq_len = 4\n", "seq_len = 4\ncheckpointing = \"full\"\n", 1) + // lines 1-6
				"[policy]\nunits = \"block-children\"\n" + // 7-8
				"[[module]]\nname = \"layers\"\nrepeat = 3\n" + // 9-11
				"[[module.module]]\nname = \"a\"\nkind = \"linear\"\nin = 8\nout = 8\n" + // 12-16
				"[[module.module]]\nname = \"b\"\nkind = \"linear\"\nin = 8\nout = 8\n", // 17-21
			errs: []string{
				`m.toml:12:1: "layers.0.a" is an FSDP unit inside the activation-checkpoint region "layers.0": `,
				`	m.toml:9:1: note: the activation-checkpoint region "layers.0" is declared here`,
				`m.toml:17:1: "layers.0.b" is an FSDP unit inside the activation-checkpoint region "layers.0": `,
				`	m.toml:9:1: note: the activation-checkpoint region "layers.0" is declared here`,
			},
		},
		{
			// A pattern that reaches inside a compute module is placed at
			// the pattern, with a note at the module.
			name: "unit inside a compute module",
			model: head + "[policy]\nunits = [\"blk\", \"att.wq\"]\n" + // 6-7
				"[[module]]\nname = \"blk\"\nkind = \"linear\"\nin = 8\nout = 8\n" + // 8-12
				"[[module]]\nname = \"att\"\nkind = \"attention\"\ndim = 8\nheads = 2\n", // 13-17
			errs: []string{
				`m.toml:7:17: policy.units makes "att.wq" a unit, but it is part of attention module "att", which runs as one piece; make "att" the unit instead`,
				`	m.toml:13:1: note: attention module "att" is declared here`,
			},
		},
		{
			// A module listed in two groups (one fully_shard call on
			// several modules each), at the second listing, with a note
			// at the first.
			name: "module in two listed groups",
			model: head + "[policy]\nunits = [[\"a\", \"b\"], [\"b\"]]\n" + // 6-7
				"[[module]]\nname = \"a\"\nkind = \"linear\"\nin = 4\nout = 4\n" + // 8-12
				"[[module]]\nname = \"b\"\nkind = \"linear\"\nin = 4\nout = 4\n", // 13-17
			errs: []string{
				`m.toml:7:23: policy.units: module "b" is in two groups (0 and 1); fully_shard takes a module once`,
				`	m.toml:7:16: note: group 0 lists it here`,
			},
		},
		{
			// Two tensors shared across units: two errors, each at its
			// parameter, with a note at each unit.
			name: "two tied tensors",
			model: head + "[policy]\nunits = [\"a\", \"b\"]\n" + // 6-7
				"[[module]]\nname = \"a\"\nkind = \"linear\"\nin = 4\nout = 4\nbias = true\n" + // 8-13
				"[[module]]\nname = \"b\"\nkind = \"linear\"\nin = 4\nout = 4\n" + // 14-18
				"[[module.param]]\nname = \"w2\"\nshape = [4, 4]\ntied_to = \"a.weight\"\n" + // 19-22
				"[[module.param]]\nname = \"b2\"\nshape = [4]\ntied_to = \"a.bias\"\n", // 23-26
			errs: []string{
				`m.toml:8:1: parameter a.bias is shared by units a and b (tied: a.bias = b.b2); FSDP2 rejects`,
				`	m.toml:7:10: note: unit a uses it`,
				`	m.toml:7:15: note: unit b uses it`,
				`m.toml:8:1: parameter a.weight is shared by units a and b (tied: a.weight = b.w2); FSDP2 rejects`,
				`	m.toml:7:10: note: unit a uses it`,
				`	m.toml:7:15: note: unit b uses it`,
			},
		},
		{
			// Two groups mixing trainable dtypes: both reported, each at
			// its module, with a note at each parameter. A module's
			// [[module.param]] entries come before its kind's own.
			name: "two groups mixing dtypes",
			model: head + "[policy]\nunits = [\"a\", \"b\"]\n" + // 6-7
				"[[module]]\nname = \"a\"\nkind = \"linear\"\nin = 4\nout = 4\n" + // 8-12
				"[[module.param]]\nname = \"s\"\nshape = [4]\ndtype = \"bf16\"\n" + // 13-16
				"[[module]]\nname = \"b\"\nkind = \"linear\"\nin = 4\nout = 4\n" + // 17-21
				"[[module.param]]\nname = \"s\"\nshape = [4]\ndtype = \"fp16\"\n", // 22-25
			errs: []string{
				`m.toml:8:1: group a: trainable parameters of one group must share a dtype (FSDP2 asserts it); the group is bf16 but a.weight is fp32`,
				`	m.toml:13:1: note: a.s is bf16`,
				`	m.toml:8:1: note: a.weight is fp32`,
				`m.toml:17:1: group b: trainable parameters of one group must share a dtype (FSDP2 asserts it); the group is fp16 but b.weight is fp32`,
				`	m.toml:22:1: note: b.s is fp16`,
				`	m.toml:17:1: note: b.weight is fp32`,
			},
		},
		{
			// shard_dim on a dimension the shard group does not divide,
			// with a note where the override sets it.
			name: "shard_dim not divisible",
			model: strings.Replace(head, "world_size = 2", "world_size = 4", 1) +
				"[policy]\nunits = [\"l\"]\n" + // 6-7
				"[[policy.override]]\nmatch = \"l\"\nshard_dim = 1\n" + // 8-10
				"[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 6\nout = 8\n", // 11-15
			errs: []string{
				`m.toml:11:1: parameter l.weight: shard_dim = 1 needs dimension 1 (6) divisible by the shard group size 4`,
				`	m.toml:10:1: note: shard_dim = 1 is set here`,
			},
		},
		{
			// Refused before the units are built, at the setting it names.
			name: "schedule too long",
			model: strings.Replace(head, "seq_len = 4\n", "seq_len = 4\ngrad_accum = 1048576\n", 1) + // 1-6
				"[[module]]\nname = \"l\"\nrepeat = 2\nkind = \"linear\"\nin = 8\nout = 8\n",
			errs: []string{
				`m.toml:3:1: the schedule needs more than 4194304 operations per rank (train.grad_accum = 1048576 micro-batches over 3 FSDP units)`,
			},
		},
		{
			// Over the budget: at memory_budget, the setting to change.
			name: "does not fit",
			model: head + "memory_budget = \"1 MiB\"\n" + // 6
				"[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 1024\nout = 1024\n",
			errs: []string{
				`m.toml:6:1: the plan does not fit: it reserves`,
			},
		},
		{
			// Warnings, in source order: a tie merged at policy.tied, an
			// override's reshard_after_forward = 1 at the key, a deferred
			// reduce-scatter at the group's module (the root: the file).
			name: "warnings",
			model: head + "[policy]\nunits = [\"emb\", \"head\"]\ntied = \"merge\"\n" + // 6-8
				"[[policy.override]]\nmatch = \"emb\"\nreshard_after_forward = 1\n" + // 9-11
				tiedModules,
			warns: []string{
				`m.toml: warning: group (root): its inputs need no gradient`,
				`m.toml:8:1: warning: units emb, head share tied parameters and were merged into one group (policy.tied = "merge")`,
				`m.toml:11:1: warning: group emb: reshard_after_forward = 1 keeps the whole unsharded parameters, the same as false`,
				`m.toml:13:1: warning: group emb: its inputs need no gradient`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustLoadText(t, "m.toml", tc.model)
			r, err := Compile(m, Options{})
			if tc.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, w := range r.Warnings {
					got = append(got, w.String())
				}
				checkLines(t, got, tc.warns)
				for _, w := range r.Warnings {
					if !contains(r.Plan.Warnings, w.Msg) {
						t.Errorf("the plan lacks warning %q", w.Msg)
					}
				}
				return
			}
			var ds ir.Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("Compile returned %T, not ir.Diagnostics: %v", err, err)
			}
			// Each diagnostic's first line and its notes' lines; a
			// message of several lines (does not fit) continues on
			// lines of its own.
			var lines []string
			for _, l := range strings.Split(ds.Error(), "\n") {
				if strings.HasPrefix(l, "m.toml") || strings.HasPrefix(l, "\tm.toml") {
					lines = append(lines, l)
				}
			}
			checkLines(t, lines, tc.errs)
		})
	}
}

// checkLines compares printed diagnostics line by line: each line must
// begin with its wanted prefix, and the counts must agree.
func checkLines(t *testing.T, got, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := range want {
		ok = ok && strings.HasPrefix(got[i], want[i])
	}
	if !ok {
		t.Errorf("got:\n%s\nwant lines beginning:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestCompileSimulation: the simulation Compile returns is the one a
// caller would get by simulating the plan again, so `fsdpc plan` prints
// its breakdown from it instead of simulating twice.
func TestCompileSimulation(t *testing.T) {
	for _, name := range []string{"gpt2-124m", "t5-base", "mixtral-8x7b"} {
		r, err := Compile(zootest.Model(t, name, zootest.Layers(2)), Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, err := schedule.Simulate(r.Plan, schedule.NewModel(r.Plan))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Sim == nil || !reflect.DeepEqual(r.Sim, again) {
			t.Errorf("%s: Compile's simulation differs from simulating its plan again", name)
		}
		if !reflect.DeepEqual(r.Sim.Prediction(), r.Plan.Prediction) {
			t.Errorf("%s: the plan's prediction is not its simulation's", name)
		}
	}
}

// TestCompileSimulatesOnce: planning simulates the plan once, and the
// caller gets that simulation (fsdpc plan used to simulate it again).
func TestCompileSimulatesOnce(t *testing.T) {
	m := zootest.Model(t, "gpt2-124m", zootest.Layers(2))
	before := simulations.Load()
	r, err := Compile(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := simulations.Load() - before; n != 1 || r.Sim == nil {
		t.Errorf("Compile simulated %d times (result's simulation %v); want once, returned", n, r.Sim != nil)
	}
}
