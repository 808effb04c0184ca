package torchgen

import (
	"fmt"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/schedule"
)

// EnvVar is one environment variable whose value the plan's predictions
// assume. Launch files (Launch) set Value; the Python package's start-up
// check (python/fsdpc/preflight.py) reads the list from the plan export
// and names every variable whose value in a rank's environment differs.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// AtLeast, when above 0, accepts any whole number at least this.
	AtLeast int `json:"at_least,omitempty"`
	// Key, when set, compares only this key of a comma-separated
	// key:value list (PYTORCH_CUDA_ALLOC_CONF's form), so the user's other
	// allocator settings stand.
	Key string `json:"key,omitempty"`
	// UnsetOK: the variable's default when unset is Value.
	UnsetOK bool `json:"unset_ok"`
	// Why says which prediction depends on it.
	Why string `json:"why"`
}

// Environment is what the plan's predictions assume of every rank's
// environment, in a fixed order.
func Environment(p *schedule.Plan) []EnvVar {
	alloc := "expandable_segments:False"
	if p.Train.ExpandableSegments {
		alloc = "expandable_segments:True"
	}
	return []EnvVar{
		{
			// docs/cost-model.md ("The hardware limit on concurrent work
			// queues ... is not reached: a plan uses five streams"): the
			// simulator overlaps a rank's five streams, which needs at
			// least as many hardware queues; a value of 1, as Megatron-LM
			// sets for tensor parallelism, serializes them.
			Name: "CUDA_DEVICE_MAX_CONNECTIONS", Value: "8", AtLeast: 5, UnsetOK: true,
			Why: "the step overlaps 5 CUDA streams a rank (docs/cost-model.md); fewer hardware queues serialize them",
		},
		{
			// hardware.NCCLBytesPerCommunicator: the memory budget's allowance
			// for NCCL's buffers is sized for its default NCCL_BUFFSIZE.
			Name: "NCCL_BUFFSIZE", Value: fmt.Sprint(ncclDefaultBuffSize), UnsetOK: true,
			Why: fmt.Sprintf("the memory budget leaves %d MiB a communicator for NCCL's buffers at its default 4 MiB NCCL_BUFFSIZE (hardware.NCCLBytesPerCommunicator)", hardware.NCCLBytesPerCommunicator>>20),
		},
		{
			// schedule.Train.ExpandableSegments: the reserved-memory
			// prediction models one allocator mode (schedule/allocator.go).
			Name: "PYTORCH_CUDA_ALLOC_CONF", Value: alloc, Key: "expandable_segments", UnsetOK: !p.Train.ExpandableSegments,
			Why: "the reserved-memory prediction models the caching allocator with this expandable_segments setting (the model file's train.expandable_segments)",
		},
	}
}

// ncclDefaultBuffSize is NCCL's default NCCL_BUFFSIZE (4 MiB; NCCL's
// environment-variable documentation).
const ncclDefaultBuffSize = 4 << 20
