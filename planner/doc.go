// Package planner will turn an ir.Model into an FSDP execution plan through a
// table of passes (grouping, shard layout, reshard policy, prefetch, mixed
// precision, offload, HSDP, schedule emission), each followed by
// verification in tests. See ../shared/DESIGN.md and docs/architecture.md.
//
// Nothing is implemented here yet: the planner is the next stage to build
// (issue "Planner and plan.bin").
package planner
