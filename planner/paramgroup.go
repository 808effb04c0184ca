package planner

import (
	"fmt"

	"github.com/fsdpc/fsdpc/schedule"
)

// paramGroup is what the emitter knows about one parameter group (one
// fully_shard unit) while it emits a step. FSDP2 keeps the same facts as
// fields of FSDPParamGroup and of its FSDPParams
// (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py,
// _fsdp_param.py); the field comments name them. What the plan already
// says of the group (its parameters, layout and policy) stays in
// schedule.Group.
//
// Its hooks are methods named after FSDPParamGroup's: preForward,
// postForward, preBackward, postBackward (emit.go, emit_backward.go), which
// call unshard, waitForUnshard and reshard as FSDP2's do, and those move
// the group between FSDP2's sharded states only through toSharded,
// toShardedPostForward and toUnsharded (this file), which refuse what
// FSDP2 would refuse or what would drop a buffer without freeing it.
//
// Buffers and events are indices into the plan's buffers and events. A
// field that holds none (FSDP2's None) holds none (-1), the plan's own
// "no buffer" and "no event" (schedule.Op's Buffer, Source and Event), so
// it can be written into an operation as it is.
type paramGroup struct {
	e     *emitter
	index int // in the plan's Groups

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

	// allGatherResult is FSDPParamGroup._all_gather_result: pending from
	// unshard to wait_for_unshard (R22, R23), or to finalize for a
	// prefetch nothing waited for (R33).
	allGatherResult allGatherResult

	// state is FSDPParamGroup._sharded_state. Its zero value is sharded,
	// where every group starts and ends a step.
	state shardedState
	// unshardedParam is the copied-out parameters (FSDPParam's
	// _unsharded_param) in state unsharded; none in the others.
	unshardedParam int
	// postForwardSlice is the 1/N slice reshard_after_forward = N keeps
	// (FSDPParam's _sharded_post_forward_param_data, R36) and
	// reshardAfterForwardEvent the event recorded after it was made
	// (_reshard_after_forward_event), in state sharded-post-forward; none
	// in the others.
	postForwardSlice, reshardAfterForwardEvent int
	// staleSlice is a post-forward slice to_sharded left referenced (it
	// does not drop _sharded_post_forward_param_data), freed when the
	// next post-forward replaces it (R36, keepsStaleSlice); none
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

// shardedState is FSDP2's ShardedState.
type shardedState uint8

const (
	// sharded: only the shards are held (SHARDED).
	sharded shardedState = iota
	// shardedPostForward: a 1/N slice is held besides the shards, between
	// the post-forward and the backward copy-out (SHARDED_POST_FORWARD).
	shardedPostForward
	// unsharded: the copied-out parameters are held (UNSHARDED).
	unsharded
)

func (s shardedState) String() string {
	switch s {
	case sharded:
		return "sharded"
	case shardedPostForward:
		return "sharded-post-forward"
	case unsharded:
		return "unsharded"
	}
	return fmt.Sprintf("shardedState(%d)", uint8(s))
}

// allGatherResult is FSDP2's AllGatherResult, as far as the emitter
// follows it: the all-gather output and the event recorded after the
// collective (after the copy-in on one rank). The zero value, not
// pending, is None.
type allGatherResult struct {
	pending    bool
	out, event int
}

// commContext is the state every group shares (FSDP2's FSDPCommContext).
type commContext struct {
	// allGatherState is the last forward all-gather output, kept with its
	// copy-out event until the next group's wait_for_unshard frees it
	// (all_gather_state, R23), or the root's post-forward (R27).
	allGatherState allGatherState
	// reduceScatterStates are the reduce-scatter inputs in flight, oldest
	// first, each with the event after its collective
	// (reduce_scatter_states, R31).
	reduceScatterStates []reduceScatterState
	// postForwardOrder is the groups in post-forward order, with
	// multiplicity (post_forward_order), which implicit backward prefetch
	// reads (R40).
	postForwardOrder []int
}

// allGatherState is FSDP2's AllGatherState: an all-gather output and the
// event after its copy-out. The zero value, not held, is None.
type allGatherState struct {
	held       bool
	out, event int
}

// reduceScatterState is FSDP2's ReduceScatterState: a reduce-scatter input
// and the event after its collective.
type reduceScatterState struct {
	in, event int
}

// newParamGroup is group g before the step: sharded, holding nothing.
func newParamGroup(e *emitter, g int) paramGroup {
	return paramGroup{
		e: e, index: g,
		shardedParam: none, optimizerState: none, hostGrad: none, shardedGrad: none,
		unshardedParam: none, postForwardSlice: none, reshardAfterForwardEvent: none, staleSlice: none,
		unshardedGrad: none, accumulatedGrad: none, postReduceEvent: none,
		gradOffloadEvent: none, allReduceInput: none,
	}
}

// --- transitions between the sharded states --------------------------------

// toUnsharded makes the copied-out parameters un the group's parameters
// (FSDPParamGroup._to_unsharded, FSDPParam.to_unsharded), after
// wait_for_unshard's copy-out: a post-forward slice the copy-out read is
// freed there (R36), on the compute stream that made it and copied out.
// From unsharded it would drop the unsharded parameters held: FSDP2's
// wait_for_unshard cannot get there, as unshard is a no-op when unsharded.
func (pg *paramGroup) toUnsharded(un int) {
	switch pg.state {
	case unsharded:
		pg.illegal("to_unsharded")
		return
	case shardedPostForward:
		pg.e.free(pg.postForwardSlice)
		pg.postForwardSlice, pg.reshardAfterForwardEvent = none, none
	}
	pg.state, pg.unshardedParam = unsharded, un
}

// toShardedPostForward keeps slice, the 1/N post-forward slice reshard
// made from the unsharded parameters, frees those, and records the event
// the backward all-gather from the slice waits for
// (FSDPParamGroup._to_sharded_post_forward and
// _reshard_after_forward_event, R36). FSDP2 asserts the group unsharded.
func (pg *paramGroup) toShardedPostForward(slice int) {
	if pg.state != unsharded {
		pg.illegal("to_sharded_post_forward")
		return
	}
	e := pg.e
	e.free(pg.unshardedParam)
	pg.state, pg.unshardedParam = shardedPostForward, none
	pg.postForwardSlice, pg.reshardAfterForwardEvent = slice, e.record(schedule.StreamCompute)
}

// toSharded returns the group to its shards (FSDPParamGroup._to_sharded,
// FSDPParam.to_sharded): the unsharded parameters are freed (R26, R31);
// a post-forward slice backward never gathered from is not, as FSDP2's
// to_sharded leaves _sharded_post_forward_param_data referenced: it
// becomes the stale slice the next post-forward frees (R36). A second
// stale slice would be dropped without a free.
//
// The slice's reshard-after-forward event is dropped with it: FSDP2 waits
// for it in the next unshard whatever the state, but the root
// pre-forward's wait (R21), which comes first, already orders it.
func (pg *paramGroup) toSharded() {
	switch pg.state {
	case unsharded:
		pg.e.free(pg.unshardedParam)
		pg.unshardedParam = none
	case shardedPostForward:
		if pg.staleSlice != none {
			pg.illegal("to_sharded with a stale post-forward slice held")
			return
		}
		pg.staleSlice = pg.postForwardSlice
		pg.postForwardSlice, pg.reshardAfterForwardEvent = none, none
	}
	pg.state = sharded
}

// checkIdle checks that the group ends the step as it began, the state
// FSDP2's _reset_iter_state restores: sharded, no all-gather pending, no
// unsharded or accumulated gradients, nothing reduced and not waited for,
// no stale slice held.
func (pg *paramGroup) checkIdle() {
	switch {
	case pg.state != sharded:
		pg.illegal("end of step")
	case pg.allGatherResult.pending:
		pg.illegal("end of step with an all-gather pending")
	case pg.unshardedGrad != none || pg.accumulatedGrad != none:
		pg.illegal("end of step with unsharded gradients held")
	case pg.postReduceEvent != none || pg.gradOffloadEvent != none || pg.allReduceInput != none:
		pg.illegal("end of step with a reduction not waited for")
	case pg.shardedGrad != none || pg.staleSlice != none:
		pg.illegal("end of step with sharded gradients or a stale slice held")
	}
}

// illegal records a transition FSDP2's state machine does not make: a bug
// in the emitter, which emitSchedule reports as an internal error (the
// first one; the rest follow from it).
func (pg *paramGroup) illegal(what string) {
	if pg.e.bug == nil {
		pg.e.bug = fmt.Errorf("%s: %s in state %s", groupLabel(&pg.e.p.Groups[pg.index]), what, pg.state)
	}
}
