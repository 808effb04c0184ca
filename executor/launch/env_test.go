package launch

import (
	"reflect"
	"strings"
	"testing"
)

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

var torchrun = []string{"RANK=5", "WORLD_SIZE=16", "LOCAL_RANK=5", "LOCAL_WORLD_SIZE=8", "MASTER_ADDR=node0", "MASTER_PORT=29500"}

// with returns base with some variables replaced ("X=") or removed ("-X").
func with(base []string, changes ...string) []string {
	out := append([]string(nil), base...)
	for _, c := range changes {
		name, _, _ := strings.Cut(strings.TrimPrefix(c, "-"), "=")
		kept := out[:0]
		for _, kv := range out {
			if n, _, _ := strings.Cut(kv, "="); n != name {
				kept = append(kept, kv)
			}
		}
		out = kept
		if !strings.HasPrefix(c, "-") {
			out = append(out, c)
		}
	}
	return out
}

func TestFromEnv(t *testing.T) {
	slurm := []string{"SLURM_PROCID=9", "SLURM_NTASKS=12", "SLURM_LOCALID=1", "SLURM_NODEID=2", "SLURM_NNODES=3",
		"SLURM_TASKS_PER_NODE=4(x2),4", "SLURM_STEP_NODELIST=gpu[007-009],x", "SLURM_JOB_ID=123456"}
	for _, c := range []struct {
		name string
		env  []string
		want Env
	}{
		{"torchrun", torchrun, Env{Rank: 5, World: 16, LocalRank: 5, LocalWorld: 8, NodeRank: 0, NNodes: 2, MasterAddr: "node0", MasterPort: 29500, Convention: "torchrun"}},
		{"torchrun with the node rank", with(torchrun, "RANK=13", "GROUP_RANK=1", "GROUP_WORLD_SIZE=2"),
			Env{Rank: 13, World: 16, LocalRank: 5, LocalWorld: 8, NodeRank: 1, NNodes: 2, MasterAddr: "node0", MasterPort: 29500, Convention: "torchrun"}},
		{"torchrun wins over slurm", append(with(torchrun), "SLURM_PROCID=0"),
			Env{Rank: 5, World: 16, LocalRank: 5, LocalWorld: 8, NodeRank: 0, NNodes: 2, MasterAddr: "node0", MasterPort: 29500, Convention: "torchrun"}},
		{"one process", []string{"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "MASTER_ADDR=::1", "MASTER_PORT=1"},
			Env{World: 1, LocalWorld: 1, NNodes: 1, MasterAddr: "::1", MasterPort: 1, Convention: "torchrun"}},
		{"slurm", slurm, Env{Rank: 9, World: 12, LocalRank: 1, LocalWorld: 4, NodeRank: 2, NNodes: 3, MasterAddr: "gpu007", MasterPort: 23456, Convention: "slurm"}},
		{"slurm, uneven nodes", with(slurm, "SLURM_TASKS_PER_NODE=4(x2),3", "SLURM_NTASKS=11", "SLURM_PROCID=10", "SLURM_LOCALID=2"),
			Env{Rank: 10, World: 11, LocalRank: 2, LocalWorld: 3, NodeRank: 2, NNodes: 3, MasterAddr: "gpu007", MasterPort: 23456, Convention: "slurm"}},
		{"slurm, per node and master given", with(slurm, "-SLURM_TASKS_PER_NODE", "-SLURM_NODEID", "-SLURM_NNODES", "SLURM_NTASKS_PER_NODE=4", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=4000"),
			Env{Rank: 9, World: 12, LocalRank: 1, LocalWorld: 4, NodeRank: 2, NNodes: 3, MasterAddr: "10.0.0.1", MasterPort: 4000, Convention: "slurm"}},
		{"slurm, job node list and no job id", with(slurm, "-SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST=a-[1-2]-b[03,5]", "-SLURM_JOB_ID"),
			Env{Rank: 9, World: 12, LocalRank: 1, LocalWorld: 4, NodeRank: 2, NNodes: 3, MasterAddr: "a-1-b03", MasterPort: DefaultPort, Convention: "slurm"}},
		{"slurm, uniform counts without a node id", with(slurm, "-SLURM_NODEID", "-SLURM_NNODES", "SLURM_TASKS_PER_NODE=4(x3)"),
			Env{Rank: 9, World: 12, LocalRank: 1, LocalWorld: 4, NodeRank: 2, NNodes: 3, MasterAddr: "gpu007", MasterPort: 23456, Convention: "slurm"}},
	} {
		got, err := FromEnv(envOf(c.env...))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestFromEnvErrors(t *testing.T) {
	slurm := []string{"SLURM_PROCID=1", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "SLURM_NODEID=0", "SLURM_TASKS_PER_NODE=4(x2)", "SLURM_JOB_NODELIST=n1"}
	for _, c := range []struct {
		name string
		env  []string
		want string // in the error
	}{
		{"nothing", nil, "no rank environment: set RANK, WORLD_SIZE"},
		{"no world", with(torchrun, "-WORLD_SIZE"), "WORLD_SIZE is not set; expected the number of ranks"},
		{"word world", with(torchrun, "WORLD_SIZE=eight"), `WORLD_SIZE="eight" is not an integer; expected the number of ranks in the job, at least 1`},
		{"zero world", with(torchrun, "WORLD_SIZE=0"), "WORLD_SIZE=0 is below 1"},
		{"negative rank", with(torchrun, "RANK=-1"), "RANK=-1 is below 0; expected this process's global rank"},
		{"rank too big", with(torchrun, "RANK=16"), "RANK=16 is not below WORLD_SIZE=16"},
		{"no local rank", with(torchrun, "-LOCAL_RANK"), "LOCAL_RANK is not set; expected this process's rank on its node"},
		{"local rank too big", with(torchrun, "LOCAL_RANK=8"), "LOCAL_RANK=8 is not below LOCAL_WORLD_SIZE=8"},
		{"no local world", with(torchrun, "-LOCAL_WORLD_SIZE"), "LOCAL_WORLD_SIZE is not set"},
		{"local world too big", with(torchrun, "LOCAL_WORLD_SIZE=32", "WORLD_SIZE=16"), "LOCAL_WORLD_SIZE=32 is more than WORLD_SIZE=16"},
		{"no master addr", with(torchrun, "-MASTER_ADDR"), "MASTER_ADDR is not set; expected the host name or address of rank 0's node"},
		{"no master port", with(torchrun, "-MASTER_PORT"), "MASTER_PORT is not set; expected the port rank 0 listens on for the rendezvous (torchrun uses 29500)"},
		{"bad master port", with(torchrun, "MASTER_PORT=70000"), `MASTER_PORT="70000" is not a TCP port; expected the port rank 0 listens on for the rendezvous, 1 to 65535`},
		{"bad node rank", with(torchrun, "GROUP_RANK=x"), `GROUP_RANK="x" is not an integer; expected this node's rank`},
		{"node rank too big", with(torchrun, "GROUP_RANK=2", "GROUP_WORLD_SIZE=2"), "the node rank 2 (GROUP_RANK) is not below the number of nodes 2 (GROUP_WORLD_SIZE)"},

		{"slurm without tasks", with(slurm, "-SLURM_NTASKS"), "SLURM_NTASKS is not set; expected the number of tasks"},
		{"slurm bad procid", with(slurm, "SLURM_PROCID=one"), `SLURM_PROCID="one" is not an integer; expected this task's global rank`},
		{"slurm procid too big", with(slurm, "SLURM_PROCID=8"), "SLURM_PROCID=8 is not below SLURM_NTASKS=8"},
		{"slurm no local id", with(slurm, "-SLURM_LOCALID"), "SLURM_LOCALID is not set; expected this task's rank on its node"},
		{"slurm no per node", with(slurm, "-SLURM_TASKS_PER_NODE"), "neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set"},
		{"slurm bad tasks per node", with(slurm, "SLURM_TASKS_PER_NODE=4(x2"), `SLURM_TASKS_PER_NODE="4(x2" has a malformed repetition "4(x2"; expected a list of task counts per node such as "4(x2),3"`},
		{"slurm zero tasks per node", with(slurm, "SLURM_TASKS_PER_NODE=0,4"), `SLURM_TASKS_PER_NODE="0,4" has "0", not a positive count`},
		{"slurm node id past the list", with(slurm, "SLURM_NODEID=2"), `SLURM_NODEID=2 but SLURM_TASKS_PER_NODE="4(x2)" lists 2 nodes`},
		{"slurm uneven without node id", with(slurm, "-SLURM_NODEID", "SLURM_TASKS_PER_NODE=4,3"), "SLURM_NODEID is not set and SLURM_TASKS_PER_NODE=\"4,3\" differs between nodes"},
		{"slurm local id too big", with(slurm, "SLURM_LOCALID=4"), "SLURM_LOCALID=4 is not below SLURM_TASKS_PER_NODE=4"},
		{"slurm per node local id too big", with(slurm, "SLURM_NTASKS_PER_NODE=2", "SLURM_LOCALID=2"), "SLURM_LOCALID=2 is not below SLURM_NTASKS_PER_NODE=2"},
		{"slurm no node list", with(slurm, "-SLURM_JOB_NODELIST"), "MASTER_ADDR is not set, nor SLURM_STEP_NODELIST or SLURM_JOB_NODELIST"},
		{"slurm bad node list", with(slurm, "SLURM_JOB_NODELIST=gpu[01-04"), `SLURM_JOB_NODELIST="gpu[01-04": an unclosed '['; set MASTER_ADDR`},
		{"slurm bad bracket", with(slurm, "SLURM_JOB_NODELIST=gpu[a-b]"), "a range that does not start with a number"},
		{"slurm bad job id", with(slurm, "SLURM_JOB_ID=abc"), `SLURM_JOB_ID="abc" is not an integer`},
		{"slurm bad port", with(slurm, "MASTER_PORT=0"), `MASTER_PORT="0" is not a TCP port`},
	} {
		_, err := FromEnv(envOf(c.env...))
		if err == nil {
			t.Errorf("%s: no error, want %q", c.name, c.want)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.name, err, c.want)
		}
	}
}

func TestEnvironRoundTrip(t *testing.T) {
	e := Env{Rank: 6, World: 8, LocalRank: 2, LocalWorld: 4, NodeRank: 1, NNodes: 2, MasterAddr: "head", MasterPort: 1234, Convention: "torchrun"}
	got, err := FromEnv(envOf(e.Environ()...))
	if err != nil || got != e {
		t.Errorf("FromEnv(Environ()) = %+v, %v; want %+v", got, err, e)
	}
	if e.Addr() != "head:1234" || (Env{MasterAddr: "::1", MasterPort: 5}).Addr() != "[::1]:5" {
		t.Errorf("Addr: %s", e.Addr())
	}
	if !strings.Contains(e.String(), "rank 6 of 8 (local rank 2 of 4, node 1 of 2)") {
		t.Errorf("String: %s", e)
	}
}

func TestParseTasksPerNode(t *testing.T) {
	got, err := parseTasksPerNode("2(x3),1,4(x1)")
	if want := []int{2, 2, 2, 1, 4}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "x", "2(y3)", "2(x0)", "2(x)", "-1", "2(x99999999)"} {
		if _, err := parseTasksPerNode(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
