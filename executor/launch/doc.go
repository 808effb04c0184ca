// Package launch is the process-level plumbing of multi-process execution:
// one worker process per GPU, as torchrun runs them. It needs no GPU and
// no cgo; the CUDA worker (cmd/fsdpc-cuda) uses it.
//
// Env reads a worker's place in the job from torchrun's variables (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or
// Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE
// or SLURM_TASKS_PER_NODE); see FromEnv.
//
// Rendezvous meets the ranks at rank 0 over TCP before anything else: they
// agree on the world size and on the plan (the SHA-256 of plan.bin), and
// rank 0 hands every rank a 128-byte blob (NCCL's ncclUniqueId). Barrier
// synchronises the ranks later over the same connections.
//
// Launch starts a node's workers with that environment, prefixes their
// output with "[rank N] ", and tears every worker down (SIGTERM, then
// SIGKILL after a grace period) when one fails, when the context is
// cancelled, or when a watchdog sees no output for too long.
//
// # Wire protocol
//
// Every message is a frame: a 12-byte header, then a payload of at most
// MaxPayload (4096) bytes. Integers are big-endian.
//
//	offset size  field
//	0      4     magic "FSRZ"
//	4      2     protocol version (1)
//	6      1     type
//	7      1     reserved, 0
//	8      4     payload length n ≤ 4096
//	12     n     payload
//
// Types and payloads:
//
//	1 HELLO    rank → rank 0   rank u32, world u32, plan SHA-256 [32],
//	                           label length u8, label (host:pid, UTF-8)
//	2 WELCOME  rank 0 → rank   world u32, plan SHA-256 [32], ID [128]
//	3 REJECT   rank 0 → rank   code u8, reason (UTF-8, the rest); the
//	                           connection then closes
//	4 BARRIER  rank → rank 0   sequence number u64 (1, 2, …)
//	5 RELEASE  rank 0 → rank   the same sequence number
//
// REJECT codes: 1 not the protocol, 2 another protocol version, 3 another
// world size, 4 a rank out of range, 5 a duplicate rank, 6 different
// plans, 7 ranks missing at the deadline, 8 aborted (a rank left, rank 0
// stopped). A reader refuses a wrong magic, another version, a non-zero
// reserved byte, a length over the bound, a truncated frame, a payload of
// the wrong size for its type and a label that is not UTF-8, with an error
// and never a panic.
//
// A rendezvous: rank 0 listens; every other rank connects, retrying until
// its deadline, and sends HELLO. Rank 0 answers a connection whose first
// frame is not ours with REJECT and keeps waiting (a port probe must not
// kill a job), but fails at once, naming the ranks involved, on another
// protocol version, another world size, a rank out of range or a duplicate
// rank. When all World−1 ranks are there and their plan hashes equal rank
// 0's, every rank gets WELCOME; otherwise every connected rank gets the
// same REJECT: the ranks whose plans differ with each hash and who holds
// it, or the ranks that never arrived by the deadline.
//
// A barrier: every rank sends BARRIER n; when rank 0 has them all and is
// there itself, it sends RELEASE n to all. When a rank's connection closes
// (its process died) or the deadline passes, rank 0 sends REJECT to the
// others naming the ranks, so that every rank fails within a round trip.
package launch
