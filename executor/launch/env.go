package launch

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// The torchrun variables, which Launch sets for every worker.
const (
	EnvRank       = "RANK"
	EnvWorldSize  = "WORLD_SIZE"
	EnvLocalRank  = "LOCAL_RANK"
	EnvLocalWorld = "LOCAL_WORLD_SIZE"
	EnvNodeRank   = "GROUP_RANK"       // torchrun's name for the node rank
	EnvNNodes     = "GROUP_WORLD_SIZE" // and for the number of nodes
	EnvMasterAddr = "MASTER_ADDR"
	EnvMasterPort = "MASTER_PORT"
)

// DefaultPort is torchrun's default MASTER_PORT; Slurm jobs without one get
// a port derived from the job id instead (see FromEnv).
const DefaultPort = 29500

// Env is one process's place in the job: its rank among all ranks, its
// rank on its node, and where rank 0 holds the rendezvous.
type Env struct {
	Rank, World           int // 0 ≤ Rank < World
	LocalRank, LocalWorld int // the rank on this node and the ranks on it
	NodeRank, NNodes      int // this node and the number of nodes
	MasterAddr            string
	MasterPort            int
	// Convention is where the values came from: "torchrun" or "slurm".
	Convention string
}

// Addr is the rendezvous address, host:port.
func (e Env) Addr() string {
	return net.JoinHostPort(e.MasterAddr, strconv.Itoa(e.MasterPort))
}

// Environ is the environment, KEY=value, that describes e in torchrun's
// convention; Launch adds it to each worker's environment.
func (e Env) Environ() []string {
	return []string{
		EnvRank + "=" + strconv.Itoa(e.Rank),
		EnvWorldSize + "=" + strconv.Itoa(e.World),
		EnvLocalRank + "=" + strconv.Itoa(e.LocalRank),
		EnvLocalWorld + "=" + strconv.Itoa(e.LocalWorld),
		EnvNodeRank + "=" + strconv.Itoa(e.NodeRank),
		EnvNNodes + "=" + strconv.Itoa(e.NNodes),
		EnvMasterAddr + "=" + e.MasterAddr,
		EnvMasterPort + "=" + strconv.Itoa(e.MasterPort),
	}
}

func (e Env) String() string {
	return fmt.Sprintf("rank %d of %d (local rank %d of %d, node %d of %d), rendezvous at %s (%s)",
		e.Rank, e.World, e.LocalRank, e.LocalWorld, e.NodeRank, e.NNodes, e.Addr(), e.Convention)
}

// FromEnv reads the rank environment through getenv (os.Getenv in a
// worker). torchrun's variables win when RANK is set:
//
//	RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//	(required); GROUP_RANK, GROUP_WORLD_SIZE (optional: the node rank and
//	the number of nodes, else RANK / LOCAL_WORLD_SIZE and
//	⌈WORLD_SIZE / LOCAL_WORLD_SIZE⌉)
//
// Otherwise, when SLURM_PROCID is set, Slurm's (srun):
//
//	SLURM_PROCID → rank, SLURM_NTASKS → world, SLURM_LOCALID → local rank,
//	SLURM_NTASKS_PER_NODE, or else this node's entry of SLURM_TASKS_PER_NODE
//	("4(x2),3": 4 tasks on each of two nodes, then 3), → local world;
//	SLURM_NODEID, SLURM_NNODES (optional) → node rank and nodes.
//	MASTER_ADDR defaults to the first host of SLURM_STEP_NODELIST (or
//	SLURM_JOB_NODELIST), where srun places task 0; MASTER_PORT to
//	20000 + SLURM_JOB_ID mod 10000, so that jobs sharing a node do not
//	collide, or 29500 without a job id.
//
// Errors name the variable and say what it must hold.
func FromEnv(getenv func(string) string) (Env, error) {
	if getenv(EnvRank) != "" {
		return torchrunEnv(getenv)
	}
	if getenv("SLURM_PROCID") != "" {
		return slurmEnv(getenv)
	}
	return Env{}, fmt.Errorf("no rank environment: set %s, %s, %s, %s, %s and %s as torchrun does, or start the workers with srun (SLURM_PROCID, SLURM_NTASKS, …), or let `fsdpc run --backend cuda --nproc-per-node N` start them",
		EnvRank, EnvWorldSize, EnvLocalRank, EnvLocalWorld, EnvMasterAddr, EnvMasterPort)
}

// envReader reads integers from the environment, keeping the first error.
type envReader struct {
	getenv func(string) string
	err    error
}

// int reads a required integer ≥ min; what says what it means.
func (r *envReader) int(name string, min int, what string) int {
	v, ok := r.optInt(name, min, what)
	if !ok && r.err == nil {
		r.err = fmt.Errorf("%s is not set; expected %s", name, what)
	}
	return v
}

// optInt reads an optional integer ≥ min: ok is false when it is unset.
func (r *envReader) optInt(name string, min int, what string) (v int, ok bool) {
	if r.err != nil {
		return 0, false
	}
	s := r.getenv(name)
	if s == "" {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		r.err = fmt.Errorf("%s=%q is not an integer; expected %s", name, s, what)
		return 0, false
	}
	if n < min {
		r.err = fmt.Errorf("%s=%d is below %d; expected %s", name, n, min, what)
		return 0, false
	}
	return n, true
}

func (r *envReader) port(name string, s string) int {
	if r.err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 65535 {
		r.err = fmt.Errorf("%s=%q is not a TCP port; expected the port rank 0 listens on for the rendezvous, 1 to 65535", name, s)
		return 0
	}
	return n
}

func torchrunEnv(getenv func(string) string) (Env, error) {
	r := &envReader{getenv: getenv}
	e := Env{Convention: "torchrun"}
	e.World = r.int(EnvWorldSize, 1, "the number of ranks in the job, at least 1")
	e.Rank = r.int(EnvRank, 0, "this process's global rank, 0 ≤ RANK < WORLD_SIZE")
	e.LocalWorld = r.int(EnvLocalWorld, 1, "the number of ranks on this node, at least 1")
	e.LocalRank = r.int(EnvLocalRank, 0, "this process's rank on its node (its GPU), 0 ≤ LOCAL_RANK < LOCAL_WORLD_SIZE")
	nodeRank, hasNode := r.optInt(EnvNodeRank, 0, "this node's rank, 0 ≤ GROUP_RANK < GROUP_WORLD_SIZE")
	nnodes, hasNNodes := r.optInt(EnvNNodes, 1, "the number of nodes, at least 1")
	if r.err == nil {
		e.MasterAddr = strings.TrimSpace(getenv(EnvMasterAddr))
		if e.MasterAddr == "" {
			r.err = fmt.Errorf("%s is not set; expected the host name or address of rank 0's node, where the rendezvous is held", EnvMasterAddr)
		}
	}
	if r.err == nil {
		p := getenv(EnvMasterPort)
		if p == "" {
			r.err = fmt.Errorf("%s is not set; expected the port rank 0 listens on for the rendezvous (torchrun uses %d)", EnvMasterPort, DefaultPort)
		} else {
			e.MasterPort = r.port(EnvMasterPort, p)
		}
	}
	if r.err != nil {
		return Env{}, r.err
	}
	e.NodeRank, e.NNodes = e.Rank/e.LocalWorld, (e.World+e.LocalWorld-1)/e.LocalWorld
	if hasNode {
		e.NodeRank = nodeRank
	}
	if hasNNodes {
		e.NNodes = nnodes
	}
	return e, e.check(EnvRank, EnvWorldSize, EnvLocalRank, EnvLocalWorld, EnvNodeRank, EnvNNodes)
}

func slurmEnv(getenv func(string) string) (Env, error) {
	r := &envReader{getenv: getenv}
	e := Env{Convention: "slurm"}
	e.World = r.int("SLURM_NTASKS", 1, "the number of tasks (ranks) of the job step, at least 1")
	e.Rank = r.int("SLURM_PROCID", 0, "this task's global rank, 0 ≤ SLURM_PROCID < SLURM_NTASKS")
	e.LocalRank = r.int("SLURM_LOCALID", 0, "this task's rank on its node, 0 ≤ SLURM_LOCALID < the tasks on the node")
	nodeID, hasNode := r.optInt("SLURM_NODEID", 0, "this node's index in the job step, 0 ≤ SLURM_NODEID < SLURM_NNODES")
	nnodes, hasNNodes := r.optInt("SLURM_NNODES", 1, "the number of nodes, at least 1")
	perNode, hasPerNode := r.optInt("SLURM_NTASKS_PER_NODE", 1, "the number of tasks on each node, at least 1")
	if r.err != nil {
		return Env{}, r.err
	}
	var counts []int // tasks per node, when SLURM_TASKS_PER_NODE gives them
	localWorldVar := "SLURM_NTASKS_PER_NODE"
	switch {
	case hasPerNode:
		e.LocalWorld = perNode
	case getenv("SLURM_TASKS_PER_NODE") != "":
		localWorldVar = "SLURM_TASKS_PER_NODE"
		var err error
		counts, err = parseTasksPerNode(getenv("SLURM_TASKS_PER_NODE"))
		if err != nil {
			return Env{}, err
		}
		switch {
		case hasNode && nodeID >= len(counts):
			return Env{}, fmt.Errorf("SLURM_NODEID=%d but SLURM_TASKS_PER_NODE=%q lists %d nodes", nodeID, getenv("SLURM_TASKS_PER_NODE"), len(counts))
		case hasNode:
			e.LocalWorld = counts[nodeID]
		case uniform(counts):
			e.LocalWorld = counts[0]
		default:
			return Env{}, fmt.Errorf("SLURM_NODEID is not set and SLURM_TASKS_PER_NODE=%q differs between nodes; expected SLURM_NODEID, this node's index, to pick this node's task count", getenv("SLURM_TASKS_PER_NODE"))
		}
	default:
		return Env{}, fmt.Errorf("neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set; expected the number of tasks on this node (srun sets SLURM_TASKS_PER_NODE, e.g. \"4(x2)\")")
	}
	e.NodeRank, e.NNodes = e.Rank/e.LocalWorld, (e.World+e.LocalWorld-1)/e.LocalWorld
	if counts != nil {
		e.NNodes = len(counts)
	}
	if hasNode {
		e.NodeRank = nodeID
	}
	if hasNNodes {
		e.NNodes = nnodes
	}

	e.MasterAddr = strings.TrimSpace(getenv(EnvMasterAddr))
	if e.MasterAddr == "" {
		name := "SLURM_STEP_NODELIST"
		list := getenv(name)
		if list == "" {
			name = "SLURM_JOB_NODELIST"
			list = getenv(name)
		}
		if list == "" {
			return Env{}, fmt.Errorf("%s is not set, nor SLURM_STEP_NODELIST or SLURM_JOB_NODELIST to take rank 0's node from; expected the host name or address of rank 0's node", EnvMasterAddr)
		}
		host, err := firstHost(list)
		if err != nil {
			return Env{}, fmt.Errorf("%s=%q: %v; set %s to rank 0's node instead", name, list, err, EnvMasterAddr)
		}
		e.MasterAddr = host
	}
	if p := getenv(EnvMasterPort); p != "" {
		e.MasterPort = r.port(EnvMasterPort, p)
	} else if job, ok := r.optInt("SLURM_JOB_ID", 0, "the Slurm job id, a non-negative integer"); ok {
		e.MasterPort = 20000 + job%10000
	} else {
		e.MasterPort = DefaultPort
	}
	if r.err != nil {
		return Env{}, r.err
	}
	return e, e.check("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", localWorldVar, "SLURM_NODEID", "SLURM_NNODES")
}

// check tests the ranges that relate two variables, naming them.
func (e Env) check(rank, world, localRank, localWorld, nodeRank, nnodes string) error {
	switch {
	case e.Rank >= e.World:
		return fmt.Errorf("%s=%d is not below %s=%d; expected 0 ≤ %s < %s", rank, e.Rank, world, e.World, rank, world)
	case e.LocalRank >= e.LocalWorld:
		return fmt.Errorf("%s=%d is not below %s=%d; expected 0 ≤ %s < %s", localRank, e.LocalRank, localWorld, e.LocalWorld, localRank, localWorld)
	case e.LocalWorld > e.World:
		return fmt.Errorf("%s=%d is more than %s=%d: a node cannot hold more ranks than the job", localWorld, e.LocalWorld, world, e.World)
	case e.NodeRank >= e.NNodes:
		return fmt.Errorf("the node rank %d (%s) is not below the number of nodes %d (%s)", e.NodeRank, nodeRank, e.NNodes, nnodes)
	}
	return nil
}

func uniform(xs []int) bool {
	for _, x := range xs {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// parseTasksPerNode expands Slurm's SLURM_TASKS_PER_NODE, "4(x2),3", into
// one count per node: [4 4 3].
func parseTasksPerNode(s string) ([]int, error) {
	bad := func(why string) error {
		return fmt.Errorf("SLURM_TASKS_PER_NODE=%q %s; expected a list of task counts per node such as \"4(x2),3\"", s, why)
	}
	var out []int
	for _, item := range strings.Split(strings.TrimSpace(s), ",") {
		count, rep := item, "1"
		if i := strings.IndexByte(item, '('); i >= 0 {
			if !strings.HasPrefix(item[i:], "(x") || !strings.HasSuffix(item, ")") {
				return nil, bad(fmt.Sprintf("has a malformed repetition %q", item))
			}
			count, rep = item[:i], item[i+2:len(item)-1]
		}
		n, err1 := strconv.Atoi(count)
		k, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || n < 1 || k < 1 {
			return nil, bad(fmt.Sprintf("has %q, not a positive count", item))
		}
		if len(out)+k > 1<<20 {
			return nil, bad("lists more than a million nodes")
		}
		for range k {
			out = append(out, n)
		}
	}
	return out, nil
}

// firstHost returns the first host of a Slurm host list: "gpu[003-010,12],x"
// gives "gpu003", each bracket taking its first value.
func firstHost(list string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(list); i++ {
		switch c := list[i]; c {
		case ',':
			i = len(list)
		case '[':
			j := strings.IndexByte(list[i:], ']')
			if j < 0 {
				return "", fmt.Errorf("an unclosed '['")
			}
			inner := list[i+1 : i+j]
			if k := strings.IndexAny(inner, ",-"); k >= 0 {
				inner = inner[:k]
			}
			if inner == "" || strings.Trim(inner, "0123456789") != "" {
				return "", fmt.Errorf("a range that does not start with a number")
			}
			b.WriteString(inner)
			i += j
		case ']':
			return "", fmt.Errorf("a ']' without '['")
		default:
			b.WriteByte(c)
		}
	}
	host := strings.TrimSpace(b.String())
	if host == "" {
		return "", fmt.Errorf("no host")
	}
	return host, nil
}
