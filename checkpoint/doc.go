// Package checkpoint derives, from a finished schedule.Plan, the sharded
// checkpoint that PyTorch's Distributed Checkpoint (DCP) writes for it and
// what saving, loading and resharding it costs.
//
// It is a stage of its own because it reads only the plan (never the model
// file), and three front ends use it: fsdpc show (a summary), fsdpc
// checkpoint (sizes and save/load time) and fsdpc reshard (the reads a new
// plan's ranks perform on an old plan's checkpoint).
//
// The layout follows the planner's shard layout (planner/layout.go,
// docs/semantics.md R11): rank k of a shard group of size W holds rows
// [k·c, min((k+1)·c, d)) of the shard dimension, c = ceil(d/W), padding
// excluded; with HSDP every replicate group holds the same shards, and DCP
// writes each distinct chunk once (dedup.go). Optimizer states follow their
// parameter's sharding (layout.go). docs/checkpoint.md documents the
// layout, the cost model and its figures.
package checkpoint
