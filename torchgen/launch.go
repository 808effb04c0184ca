package torchgen

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/schedule"
)

// Engines are the launchers LaunchFile writes for, in the order `fsdpc
// emit launch --engine` lists them.
var Engines = []string{"torchrun", "slurm", "kubernetes", "ray"}

// LaunchJob is what a launch file needs beyond the plan: where the job
// finds the plan export and the user's training program.
type LaunchJob struct {
	Engine string
	// PlanExport is the plan export (fsdpc export) as the job's processes
	// see it: every rank's start-up check reads it.
	PlanExport string
	// Script and Args are the user's training program and its arguments.
	Script string
	Args   []string
	// Source names the plan file, for the header comment.
	Source string
	// PlanSHA256 is the plan's hash (the export's plan_sha256): the file
	// sets FSDPC_PLAN_SHA256 to it, and every rank's check refuses an
	// export of another plan (a stale copy on one node).
	PlanSHA256 string
	// Endpoint is torchrun's rendezvous HOST:PORT (torchrun; Slurm uses
	// its first node and Port).
	Endpoint string
	// Port is the rendezvous port on Slurm's first node.
	Port int
	// MaxRestarts is torchrun's --max-restarts.
	MaxRestarts int
	// Name names the job (Slurm's --job-name, the TrainJob's
	// metadata.name).
	Name string
	// Image is the TrainJob's container image (Kubernetes; required).
	Image string
}

// Mesh is how a launcher lays out a plan's ranks: Nodes hosts of
// PerNode processes, one per GPU, rank = node × PerNode + local rank, so
// that an HSDP shard group of PerNode consecutive ranks stays on a node.
type Mesh struct {
	World, Nodes, PerNode int
}

// LaunchMesh is the plan's layout; a world that does not fill whole nodes
// is an error, since launchers start the same number of processes on
// every node.
func LaunchMesh(p *schedule.Plan) (Mesh, error) {
	c := p.Cluster
	if c.WorldSize < 1 || c.GPUsPerNode < 1 {
		return Mesh{}, fmt.Errorf("the plan's cluster has %d ranks and %d GPUs per node", c.WorldSize, c.GPUsPerNode)
	}
	per := min(c.GPUsPerNode, c.WorldSize)
	if c.WorldSize%per != 0 {
		return Mesh{}, fmt.Errorf("the plan's %d ranks do not fill nodes of %d GPUs: a launcher starts as many processes on every node", c.WorldSize, per)
	}
	return Mesh{World: c.WorldSize, Nodes: c.WorldSize / per, PerNode: per}, nil
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// PlanSHA256Var carries the plan's hash to every rank's check.
const PlanSHA256Var = "FSDPC_PLAN_SHA256"

var jobName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// DefaultJobName is the job's name when none is given: fsdpc- and the
// plan's model name, lower-cased, with every other character a dash, as
// Kubernetes names must be (an RFC 1035 label).
func DefaultJobName(p *schedule.Plan) string {
	var b strings.Builder
	b.WriteString("fsdpc-")
	for _, r := range strings.ToLower(p.Header.Model) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	n := strings.TrimRight(b.String(), "-")
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-")
	}
	return n
}

// LaunchFile writes the launch file of job for plan p: a bash script for
// torchrun, an sbatch script for Slurm, a Kubeflow Trainer TrainJob
// manifest for Kubernetes, a Ray Train program for Ray. Each sets the
// environment the plan assumes (Environment) and runs the user's program
// under `python -m fsdpc preflight`, which checks every rank's world
// against the plan before the program starts.
func LaunchFile(p *schedule.Plan, job LaunchJob) (string, error) {
	mesh, err := LaunchMesh(p)
	if err != nil {
		return "", err
	}
	if job.Script == "" {
		return "", errors.New("no training program given (--script)")
	}
	if job.PlanExport == "" {
		return "", errors.New("no plan export given (--plan-json)")
	}
	if !sha256Hex.MatchString(job.PlanSHA256) {
		return "", fmt.Errorf("plan hash %q: want 64 lower-case hex digits", job.PlanSHA256)
	}
	if job.Name == "" {
		job.Name = DefaultJobName(p)
	}
	if !jobName.MatchString(job.Name) {
		return "", fmt.Errorf("job name %q: must be lower-case letters, digits and dashes, start with a letter, at most 63 (an RFC 1035 label, as Kubernetes requires)", job.Name)
	}
	for _, s := range append([]string{job.PlanExport, job.Script, job.Endpoint, job.Image}, job.Args...) {
		if !safetext.ShellSafe(s) || !utf8.ValidString(s) {
			return "", fmt.Errorf("%s: a path or argument must be UTF-8 without NUL bytes", safetext.Term(s))
		}
	}
	if job.Port == 0 {
		job.Port = 29500
	}
	if job.Port < 1 || job.Port > 65535 {
		return "", fmt.Errorf("port %d: not a TCP port", job.Port)
	}
	if job.MaxRestarts < 0 {
		return "", fmt.Errorf("max restarts %d: must be 0 or more", job.MaxRestarts)
	}
	switch job.Engine {
	case "torchrun":
		if job.Endpoint == "" {
			job.Endpoint = fmt.Sprintf("localhost:%d", job.Port)
		}
		return torchrunScript(p, mesh, job), nil
	case "slurm":
		return slurmScript(p, mesh, job), nil
	case "kubernetes":
		if job.Image == "" {
			return "", errors.New("a TrainJob needs the container image (--image) holding torch, fsdpc's Python package and the training program")
		}
		return trainJob(p, mesh, job), nil
	case "ray":
		return rayProgram(p, mesh, job), nil
	}
	return "", fmt.Errorf("engine %q: want one of %s", job.Engine, strings.Join(Engines, ", "))
}

// header is the comment lines every launch file starts with (after any
// line the format needs first), each prefixed by prefix.
func header(p *schedule.Plan, mesh Mesh, job LaunchJob, prefix, engine string) string {
	var b strings.Builder
	line := func(format string, a ...any) {
		b.WriteString(prefix + fmt.Sprintf(format, a...) + "\n")
	}
	line("%s launch of plan %s for %s, generated by fsdpc emit launch; edit the", engine, safetext.Escape(job.Source), safetext.Escape(p.Header.Model))
	line("plan, not this file. Nodes: %d, processes per node: %d (one per GPU), world: %d.", mesh.Nodes, mesh.PerNode, mesh.World)
	line("Plan SHA-256: %s.", job.PlanSHA256)
	line("Every rank runs `python -m fsdpc preflight` on the plan export first: it")
	line("refuses to start the training program when the world, the node count,")
	line("the plan file or the environment below differ from what the plan assumes.")
	for _, e := range Environment(p) {
		line("  %s=%s: %s", e.Name, e.Value, e.Why)
	}
	return b.String()
}

// preflightArgs is the module invocation every rank runs: the check, then
// the user's program as __main__ with its arguments.
func preflightArgs(job LaunchJob) []string {
	return append([]string{"-m", "fsdpc", "preflight", job.PlanExport, job.Script}, job.Args...)
}

func shellWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = safetext.Shell(w)
	}
	return strings.Join(q, " ")
}

func exportEnv(b *strings.Builder, p *schedule.Plan, job LaunchJob) {
	for _, e := range jobEnvironment(p, job) {
		fmt.Fprintf(b, "export %s=%s\n", e.Name, safetext.Shell(e.Value))
	}
}

// jobEnvironment is what a launch file sets: the plan's Environment and
// the plan's hash.
func jobEnvironment(p *schedule.Plan, job LaunchJob) []EnvVar {
	return append(Environment(p), EnvVar{Name: PlanSHA256Var, Value: job.PlanSHA256})
}

func torchrunArgs(mesh Mesh, job LaunchJob, endpoint, id string) string {
	return fmt.Sprintf("torchrun \\\n  --nnodes=%d \\\n  --nproc-per-node=%d \\\n  --rdzv-backend=c10d \\\n  --rdzv-endpoint=%s \\\n  --rdzv-id=%s \\\n  --max-restarts=%d \\\n  %s\n",
		mesh.Nodes, mesh.PerNode, endpoint, id, job.MaxRestarts, shellWords(preflightArgs(job)))
}

func torchrunScript(p *schedule.Plan, mesh Mesh, job LaunchJob) string {
	var b strings.Builder
	b.WriteString("#!/usr/bin/env bash\n")
	b.WriteString(header(p, mesh, job, "# ", "torchrun"))
	fmt.Fprintf(&b, "#\n# Run it on each of the %d nodes; they meet at the rendezvous endpoint (c10d,\n", mesh.Nodes)
	b.WriteString("# hosted by the first torchrun to start there). FSDPC_RDZV_ENDPOINT and\n")
	b.WriteString("# FSDPC_RDZV_ID, when set, replace the endpoint and the job id below.\n")
	b.WriteString("set -euo pipefail\n\n")
	exportEnv(&b, p, job)
	fmt.Fprintf(&b, "\nendpoint=%s\n", safetext.Shell(job.Endpoint))
	b.WriteString("if [ -n \"${FSDPC_RDZV_ENDPOINT:-}\" ]; then endpoint=$FSDPC_RDZV_ENDPOINT; fi\n")
	fmt.Fprintf(&b, "id=%s\n", safetext.Shell(job.Name))
	b.WriteString("if [ -n \"${FSDPC_RDZV_ID:-}\" ]; then id=$FSDPC_RDZV_ID; fi\n\n")
	b.WriteString("exec " + torchrunArgs(mesh, job, `"$endpoint"`, `"$id"`))
	return b.String()
}

func slurmScript(p *schedule.Plan, mesh Mesh, job LaunchJob) string {
	var b strings.Builder
	b.WriteString("#!/usr/bin/env bash\n")
	// sbatch reads #SBATCH lines up to the first command; the job name is
	// a checked RFC 1035 label, so it needs no quoting there.
	fmt.Fprintf(&b, "#SBATCH --job-name=%s\n", job.Name)
	fmt.Fprintf(&b, "#SBATCH --nodes=%d\n", mesh.Nodes)
	b.WriteString("#SBATCH --ntasks-per-node=1\n")
	fmt.Fprintf(&b, "#SBATCH --gpus-per-node=%d\n", mesh.PerNode)
	b.WriteString(header(p, mesh, job, "# ", "Slurm"))
	b.WriteString("#\n# Submit with sbatch. One task a node runs torchrun, which starts a process\n")
	b.WriteString("# per GPU; the first node of the allocation hosts the c10d rendezvous.\n")
	b.WriteString("set -euo pipefail\n\n")
	exportEnv(&b, p, job)
	// The first host of the allocation; not `| head -n 1`, whose early
	// exit fails the pipeline under pipefail (SIGPIPE) on a long list.
	b.WriteString("\nhosts=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\")\n")
	b.WriteString("head_node=${hosts%%$'\\n'*}\n")
	fmt.Fprintf(&b, "port=%d\n\n", job.Port)
	fmt.Fprintf(&b, "srun --nodes=%d --ntasks-per-node=1 --kill-on-bad-exit=1 ", mesh.Nodes)
	b.WriteString(torchrunArgs(mesh, job, `"$head_node:$port"`, `"$SLURM_JOB_ID"`))
	return b.String()
}

func trainJob(p *schedule.Plan, mesh Mesh, job LaunchJob) string {
	var b strings.Builder
	b.WriteString(header(p, mesh, job, "# ", "Kubeflow Trainer (v2) TrainJob"))
	b.WriteString("#\n# Apply with kubectl. The torch-distributed runtime starts torchrun on each\n")
	b.WriteString("# node with PET_NNODES, PET_NPROC_PER_NODE and the rendezvous set from\n")
	b.WriteString("# numNodes and numProcPerNode below; the image must hold torch, fsdpc's\n")
	b.WriteString("# Python package (pip install fsdpc's repository) and the training program.\n")
	b.WriteString("apiVersion: trainer.kubeflow.org/v1alpha1\n")
	b.WriteString("kind: TrainJob\n")
	b.WriteString("metadata:\n")
	fmt.Fprintf(&b, "  name: %s\n", safetext.YAML(job.Name))
	b.WriteString("spec:\n")
	b.WriteString("  runtimeRef:\n")
	b.WriteString("    name: \"torch-distributed\"\n")
	b.WriteString("  trainer:\n")
	fmt.Fprintf(&b, "    image: %s\n", safetext.YAML(job.Image))
	fmt.Fprintf(&b, "    numNodes: %d\n", mesh.Nodes)
	fmt.Fprintf(&b, "    numProcPerNode: %d\n", mesh.PerNode)
	b.WriteString("    resourcesPerNode:\n")
	b.WriteString("      limits:\n")
	fmt.Fprintf(&b, "        nvidia.com/gpu: %d\n", mesh.PerNode)
	b.WriteString("    command:\n")
	for _, w := range append([]string{"torchrun"}, preflightArgs(job)...) {
		fmt.Fprintf(&b, "      - %s\n", safetext.YAML(w))
	}
	b.WriteString("    env:\n")
	for _, e := range jobEnvironment(p, job) {
		fmt.Fprintf(&b, "      - name: %s\n        value: %s\n", safetext.YAML(e.Name), safetext.YAML(e.Value))
	}
	return b.String()
}

func rayProgram(p *schedule.Plan, mesh Mesh, job LaunchJob) string {
	var b strings.Builder
	b.WriteString("#!/usr/bin/env python3\n")
	b.WriteString(header(p, mesh, job, "# ", "Ray Train"))
	b.WriteString("#\n# Run it where `ray.init()` reaches the cluster (or submit it with `ray job\n")
	b.WriteString("# submit -- python3 this.py`). TorchTrainer starts one worker a GPU and sets\n")
	b.WriteString("# up torch.distributed before the training program runs, so the program\n")
	b.WriteString("# must not initialize the process group again when one exists.\n")
	b.WriteString("import runpy\nimport sys\n\nimport ray\nfrom ray.train import ScalingConfig, get_context\nfrom ray.train.torch import TorchTrainer\n\n")
	fmt.Fprintf(&b, "PLAN_EXPORT = %s\n", safetext.Python(job.PlanExport))
	fmt.Fprintf(&b, "SCRIPT = %s\n", safetext.Python(job.Script))
	b.WriteString("ARGS: list[str] = [")
	for i, a := range job.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(safetext.Python(a))
	}
	b.WriteString("]\n")
	fmt.Fprintf(&b, "WORLD_SIZE = %d\n", mesh.World)
	b.WriteString("ENVIRONMENT = {\n")
	for _, e := range jobEnvironment(p, job) {
		fmt.Fprintf(&b, "    %s: %s,\n", safetext.Python(e.Name), safetext.Python(e.Value))
	}
	b.WriteString("}\n\n\n")
	b.WriteString(`def train_loop_per_worker(config: dict[str, object]) -> None:
    from fsdpc.preflight import check_or_exit

    ctx = get_context()
    check_or_exit(
        PLAN_EXPORT,
        world_size=ctx.get_world_size(),
        local_world_size=ctx.get_local_world_size(),
        rank=ctx.get_world_rank(),
    )
    sys.argv = [SCRIPT, *ARGS]
    runpy.run_path(SCRIPT, run_name="__main__")


def main() -> None:
    ray.init(runtime_env={"env_vars": ENVIRONMENT})
    trainer = TorchTrainer(
        train_loop_per_worker,
        scaling_config=ScalingConfig(
            num_workers=WORLD_SIZE,
            use_gpu=True,
            resources_per_worker={"GPU": 1},
            # PACK fills a node's GPUs before the next node's, as the
            # plan's mesh assumes; the start-up check names any other
            # placement.
            placement_strategy="PACK",
        ),
    )
    trainer.fit()


if __name__ == "__main__":
    main()
`)
	return b.String()
}
