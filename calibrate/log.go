package calibrate

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
)

// torchtitan logs one line per logged step on rank 0:
//
//	step:  2  loss:  6.1098  grad_norm:  4.6416  memory:  2.49GiB(3.14%)  tps: 177,138  tflops: 96.17  mfu: 9.72%
//
// memory is the peak the caching allocator reserved (torch.cuda's
// max_memory_reserved) and tps the tokens per second per GPU.
var titanStep = regexp.MustCompile(`step:\s*(\d+)\s.*?memory:\s*([0-9.]+)GiB.*?tps:\s*([0-9,]+)`)

// AddLog adds a measured run from a torchtitan training log and the model
// file that describes the run. Throughput is the median over the logged
// steps after the first (which includes compilation and warm-up), memory
// the largest peak logged. Errors name the file and line.
func (s *Set) AddLog(modelFile string, model []byte, logFile string, log io.Reader) error {
	m, err := ir.Load(modelFile, model)
	if err != nil {
		return err
	}
	tps, mem, err := readTitanLog(logFile, log)
	if err != nil {
		return err
	}
	gpu := hardware.PresetByDevice(m.Cluster.GPU.Name)
	if gpu == "" {
		return fmt.Errorf("%s: the GPU is given as figures; a measured run needs a GPU preset to fit its profile", modelFile)
	}
	x := run{id: logFile, source: "torchtitan log", gpu: gpu, gpuLabel: m.Cluster.GPU.Name, world: m.Cluster.WorldSize,
		gpusPerNode: m.Cluster.GPUsPerNode, microBatch: int(m.Train.MicroBatch), accum: int(m.Train.GradAccum),
		seq: int(m.Train.SeqLen), tokensPerGPU: tps[len(tps)/2], memGiB: mem, memReserved: true,
		checkpointing: m.Train.Checkpointing.String(), compile: m.Train.Compile}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil && !strings.Contains(err.Error(), "does not fit") {
		return err
	}
	s.Runs = append(s.Runs, Planned{run: x, Plan: p})
	return nil
}

// readTitanLog reads torchtitan's step lines: the tokens/s of every step
// after the first, sorted, and the largest memory figure in GiB. Errors
// name the file and line.
func readTitanLog(logFile string, log io.Reader) (tps []float64, mem float64, err error) {
	sc := bufio.NewScanner(log)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		g := titanStep.FindStringSubmatch(sc.Text())
		if g == nil {
			continue
		}
		step, _ := strconv.Atoi(g[1])
		gib, err1 := strconv.ParseFloat(g[2], 64)
		t, err2 := strconv.ParseFloat(strings.ReplaceAll(g[3], ",", ""), 64)
		if err1 != nil || err2 != nil || t <= 0 || gib <= 0 {
			return nil, 0, fmt.Errorf("%s:%d: a step line with a memory or tps figure that is not a positive number", logFile, line)
		}
		mem = max(mem, gib)
		if step > 1 {
			tps = append(tps, t)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", logFile, err)
	}
	if len(tps) == 0 {
		return nil, 0, fmt.Errorf("%s: no torchtitan step lines after step 1 (\"step: N  loss: …  memory: …GiB(…%%)  tps: …\")", logFile)
	}
	sort.Float64s(tps)
	return tps, mem, nil
}
