package schedule

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// WriteTrace writes a simulation as a Chrome trace (the JSON Trace Event
// Format Perfetto and chrome://tracing open): one track per stream with an
// event per operation, and a counter track of device memory per pool.
func WriteTrace(w io.Writer, p *Plan, sim *Simulation) error {
	b := bufio.NewWriter(w)
	enc := json.NewEncoder(b)
	// Events are written one per line so a 100,000-op trace stays
	// streamable and diffable.
	fmt.Fprintf(b, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":%q,\"fsdpc\":%q},\"traceEvents\":[\n", p.Header.Model, p.Header.FsdpcVersion)
	first := true
	emit := func(ev any) error {
		if !first {
			b.WriteString(",")
		}
		first = false
		return enc.Encode(ev)
	}
	type meta struct {
		Name string            `json:"name"`
		Ph   string            `json:"ph"`
		Pid  int               `json:"pid"`
		Tid  int               `json:"tid"`
		Args map[string]string `json:"args"`
	}
	if err := emit(meta{"process_name", "M", 0, 0, map[string]string{"name": fmt.Sprintf("rank 0 of %d (%s)", p.Cluster.WorldSize, p.Header.Model)}}); err != nil {
		return err
	}
	for s := Stream(0); s < numStreams; s++ {
		if err := emit(meta{"thread_name", "M", 0, int(s), map[string]string{"name": s.String()}}); err != nil {
			return err
		}
	}
	type span struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		Args map[string]any `json:"args,omitempty"`
	}
	t := &textWriter{p: p}
	for i := range p.Ops {
		o := &p.Ops[i]
		tm := sim.Ops[i]
		switch o.Kind {
		case OpAlloc, OpFree, OpRecord:
			continue
		case OpWait, OpSync:
			if tm.End <= tm.Start {
				continue
			}
		}
		args := map[string]any{"op": i, "detail": t.opText(o), "phase": o.Phase.String(), "micro": o.Micro}
		if o.Bytes > 0 {
			args["bytes"] = o.Bytes
		}
		if o.FLOPs > 0 {
			args["flops"] = o.FLOPs
		}
		name := o.Kind.String()
		if o.Group >= 0 {
			name += " " + p.Groups[o.Group].Label()
		}
		if err := emit(span{name, o.Phase.String(), "X", tm.Start * 1e6, (tm.End - tm.Start) * 1e6, 0, int(o.Stream), args}); err != nil {
			return err
		}
	}
	type counter struct {
		Name string           `json:"name"`
		Ph   string           `json:"ph"`
		Ts   float64          `json:"ts"`
		Pid  int              `json:"pid"`
		Args map[string]int64 `json:"args"`
	}
	for _, pt := range sim.Memory {
		args := map[string]int64{}
		for pool := Pool(0); pool < numPools; pool++ {
			if pool != PoolHost {
				args[pool.String()] = pt.Bytes[pool]
			}
		}
		if err := emit(counter{"device memory (bytes)", "C", pt.Time * 1e6, 0, args}); err != nil {
			return err
		}
	}
	b.WriteString("]}\n")
	return b.Flush()
}
