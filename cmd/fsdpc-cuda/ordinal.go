package main

import (
	"fmt"

	"github.com/fsdpc/fsdpc/executor/launch"
)

// deviceOrdinal picks the GPU a worker opens, among the devices the
// driver shows it (count: cuDeviceGetCount, which honours
// CUDA_VISIBLE_DEVICES). flag ≥ 0 is --device. Launchers bind GPUs in
// two ways, and LOCAL_RANK is the ordinal in only one:
//
//   - per node (torchrun; Slurm's default; CUDA_VISIBLE_DEVICES unset or
//     listing the node's GPUs): every process sees every GPU of the node,
//     and local rank k takes ordinal k;
//   - per task (Slurm's --gpus-per-task or --gpu-bind, a wrapper
//     exporting CUDA_VISIBLE_DEVICES per process): each process sees
//     only its own GPUs, and ordinal 0 is its first, whatever its local
//     rank.
//
// Fewer visible GPUs than ranks on the node means per-task binding; a
// single visible GPU always is ordinal 0. A rehearsal (virtual) runs on
// ordinal 0.
func deviceOrdinal(flag int, virtual bool, env launch.Env, getenv func(string) string, count int) (int, error) {
	// An empty CUDA_VISIBLE_DEVICES hides every GPU: count is then 0.
	visible := getenv("CUDA_VISIBLE_DEVICES")
	set := visible != ""
	where := "the driver shows no GPU"
	if set {
		where = fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q leaves this process no GPU", visible)
	}
	switch {
	case count < 1:
		return 0, fmt.Errorf("%s", where)
	case flag >= 0:
		if flag >= count {
			return 0, fmt.Errorf("--device %d: this process sees %d GPU(s) (ordinals 0 to %d%s)", flag, count, count-1, visibleNote(set, visible))
		}
		return flag, nil
	case virtual, count == 1:
		return 0, nil
	case env.LocalRank < count && count >= env.LocalWorld:
		return env.LocalRank, nil // bound per node
	case set && count < env.LocalWorld:
		return 0, nil // bound per task: its own GPUs, the first of them
	}
	return 0, fmt.Errorf("local rank %d of %d on this node, but this process sees %d GPU(s)%s: start at most one process per visible GPU, or pass --device",
		env.LocalRank, env.LocalWorld, count, visibleNote(set, visible))
}

func visibleNote(set bool, visible string) string {
	if !set {
		return ""
	}
	return fmt.Sprintf(", CUDA_VISIBLE_DEVICES=%q", visible)
}
