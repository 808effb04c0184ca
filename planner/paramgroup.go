package planner

// paramGroup is what the emitter knows about one parameter group (one
// fully_shard unit) while it emits a step. FSDP2 keeps the same facts as
// fields of FSDPParamGroup and of its FSDPParams
// (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py,
// _fsdp_param.py); the field comments name them. What the plan already
// says of the group (its parameters, layout and policy) stays in
// schedule.Group.
//
// Buffers and events are indices into the plan's buffers and events. A
// field that holds none (FSDP2's None) holds none (-1), the plan's own
// "no buffer" and "no event" (schedule.Op's Buffer, Source and Event), so
// it can be written into an operation as it is.
type paramGroup struct {
	// shardedParam is the group's padded shards (FSDPParam's
	// _sharded_param_data), persistent: on the device, or in pinned host
	// memory with offload (R46).
	shardedParam int
	// optimizerState is the optimizer's state for the sharded parameters,
	// persistent; none when the group trains nothing or the optimizer
	// keeps no state.
	optimizerState int
	// hostGrad is the sharded gradients in pinned host memory under
	// offload (sharded_param.grad, R46), persistent; none otherwise.
	// hostGradWritten says this step has written them, so a later
	// micro-batch adds to them.
	hostGrad        int
	hostGradWritten bool
	// shardedGrad is the sharded gradients on the device
	// (sharded_param.grad), from the group's first reduction in the step
	// to the optimizer (R49); none before and after.
	shardedGrad int

	// allGatherOut and allGatherEvent are FSDPParamGroup._all_gather_result:
	// the all-gather output unshard allocated and the event recorded after
	// the collective (after the copy-in on one rank), pending until
	// wait_for_unshard copies it out (R22, R23); none when no unshard is
	// pending.
	allGatherOut, allGatherEvent int
	// unshardedParam is the copied-out parameters (FSDPParam's
	// _unsharded_param), held from wait_for_unshard to the reshard; none
	// while the group is sharded.
	unshardedParam int
	// postForwardSlice is the 1/N slice reshard_after_forward = N keeps
	// (FSDPParam's _sharded_post_forward_param_data, R36) and
	// reshardAfterForwardEvent the event recorded after it is made
	// (_reshard_after_forward_event); none otherwise.
	postForwardSlice, reshardAfterForwardEvent int
	// staleSlice is a post-forward slice post-backward left referenced
	// (FSDP2's to_sharded keeps _sharded_post_forward_param_data), freed
	// when the next post-forward replaces it (R36, keepsStaleSlice); none
	// otherwise.
	staleSlice int
	// unshardedGrad is autograd's unsharded gradients
	// (unsharded_param.grad, R29), from backward reaching the group to its
	// post-backward; none otherwise.
	unshardedGrad int
	// accumulatedGrad is the no-sync accumulator in the reduce dtype
	// (FSDPParam.unsharded_accumulated_grad, R49); none otherwise.
	accumulatedGrad int
	// postReduceEvent is the event after the group's reduction and what
	// follows it (_post_reduce_event, D10), waited for at finalize (R33);
	// none otherwise.
	postReduceEvent int
	// gradOffloadEvent is the event after the device-to-host copy of the
	// gradients (FSDPParam.grad_offload_event, R46); none otherwise.
	gradOffloadEvent int
	// allReduceInput is HSDP's reduce-scatter output held to finalize
	// (_all_reduce_state.all_reduce_input, R48, FSDP2 pitfall 6); none
	// otherwise.
	allReduceInput int
	// mistargeted is set when a prefetch gathered the group and nothing
	// waited for it (FSDP2 pitfall 5): the planner warns.
	mistargeted bool
}

// none is a buffer or event index that refers to nothing.
const none = -1

// newParamGroup is a group before the step: sharded, holding nothing.
func newParamGroup() paramGroup {
	return paramGroup{
		shardedParam: none, optimizerState: none, hostGrad: none, shardedGrad: none,
		allGatherOut: none, allGatherEvent: none, unshardedParam: none,
		postForwardSlice: none, reshardAfterForwardEvent: none, staleSlice: none,
		unshardedGrad: none, accumulatedGrad: none, postReduceEvent: none,
		gradOffloadEvent: none, allReduceInput: none,
	}
}

// commContext is the state every group shares (FSDP2's FSDPCommContext).
type commContext struct {
	// allGatherState is the last forward all-gather output, kept with the
	// copy-out event until the next group's wait_for_unshard frees it
	// (all_gather_state, R23); buf is none when none is kept.
	allGatherState struct{ buf, event int }
	// reduceScatterStates are the reduce-scatter inputs in flight, oldest
	// first, each with the event after its collective
	// (reduce_scatter_states, R31).
	reduceScatterStates []struct{ buf, event int }
	// postForwardOrder is the groups in post-forward order, with
	// multiplicity (post_forward_order), which implicit backward prefetch
	// reads (R40).
	postForwardOrder []int
}
