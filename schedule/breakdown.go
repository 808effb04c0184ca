package schedule

// StepBreakdown splits a simulated step into parts that add up to its
// StepTime. It follows the compute stream from the start of the step: at
// every instant that stream is either running an operation (split by what
// the operation is) or idle, and it is idle for one of two reasons, the CPU
// has not issued its next operation yet or a wait holds it for another
// stream. After its last operation the step lasts as long as the other
// streams or the CPU still run (Tail).
type StepBreakdown struct {
	// Compute is the forward and backward kernels (recomputation
	// included) at their durations alone on the GPU; OverlapSlowdown what
	// they lose to collectives running beside them (the model's Overlap).
	Compute, OverlapSlowdown float64
	// Optimizer is the optimizer step on the compute stream. A host-side
	// (offloaded) optimizer runs on the CPU and shows in WaitingForCPU.
	Optimizer float64
	// FSDPKernels is FSDP2's own work on the compute stream: splitting
	// all-gather outputs, copying gradients into reduce-scatter inputs,
	// divides, casts and accumulation.
	FSDPKernels float64
	// ExposedComm is the compute stream waiting for other streams
	// (collectives and the copies that feed them); the same figure as
	// Simulation.ExposedComm.
	ExposedComm float64
	// WaitingForCPU is the compute stream idle until the CPU issues its
	// next operation: kernel launch cost while the GPU is ahead of the
	// CPU, and the CPU blocked in a host sync or a host-side optimizer.
	WaitingForCPU float64
	// Tail is the time after the compute stream's last operation until the
	// last stream and the CPU are done (a trailing reduce-scatter or
	// optimizer step on another stream).
	Tail float64
}

// Parts lists the breakdown's parts in a fixed order with the names the
// CLI prints and the JSON keys use; the parts add up to the step time.
func (b StepBreakdown) Parts() []BreakdownPart {
	return []BreakdownPart{
		{"compute", "compute", "forward and backward kernels", b.Compute},
		{"overlap_slowdown", "overlap slowdown", "compute slowed by collectives beside it", b.OverlapSlowdown},
		{"optimizer", "optimizer", "optimizer step on the GPU", b.Optimizer},
		{"fsdp_kernels", "FSDP copies", "FSDP copies, casts and divides", b.FSDPKernels},
		{"exposed_communication", "exposed communication", "waiting for communication", b.ExposedComm},
		{"waiting_for_cpu", "waiting for CPU", "waiting for the CPU to issue", b.WaitingForCPU},
		{"tail", "tail", "other streams after the last compute", b.Tail},
	}
}

// Total is the sum of the parts: the step time, to rounding.
func (b StepBreakdown) Total() float64 {
	t := 0.0
	for _, p := range b.Parts() {
		t += p.Seconds
	}
	return t
}

// BreakdownPart is one named part of a step: its JSON key, a short name
// and a longer label for people.
type BreakdownPart struct {
	Key, Short, Label string
	Seconds           float64
}

// breakdown splits the simulated step (StepBreakdown). base holds every
// operation's duration alone on the model, so the slowdown from
// overlapping collectives can be told from the compute itself.
func (s *Simulation) breakdown(p *Plan, base []float64) StepBreakdown {
	b := StepBreakdown{ExposedComm: s.ExposedComm, WaitingForCPU: s.waitingForCPU}
	for i := range p.Ops {
		o := &p.Ops[i]
		if o.Stream != StreamCompute {
			continue
		}
		d := s.Ops[i].End - s.Ops[i].Start
		switch o.Kind {
		case OpAlloc, OpFree, OpRecord, OpWait, OpSync:
			// No time on the stream; a wait's idle time is ExposedComm.
		case OpForward, OpBackward:
			b.Compute += base[i]
			b.OverlapSlowdown += d - base[i]
		case OpOptimizer:
			b.Optimizer += d
		default:
			b.FSDPKernels += d
		}
	}
	b.Tail = s.StepTime - s.computeEnd
	return b
}
