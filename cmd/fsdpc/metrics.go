package main

import (
	"encoding/json"
	"io"
	"sort"

	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/schedule/diff"
)

// metrics is one simulated step of a plan as numbers, in the JSON of plan,
// sim and diff and as the names gates test (gate.go): times in seconds,
// sizes in bytes, rates per second, utilizations as fractions. docs/json.md
// lists them.
type metrics struct {
	Step float64 `json:"step"`
	// The step's parts (schedule.StepBreakdown); they add up to Step.
	Compute              float64 `json:"compute"`
	OverlapSlowdown      float64 `json:"overlap_slowdown"`
	Optimizer            float64 `json:"optimizer"`
	FSDPKernels          float64 `json:"fsdp_kernels"`
	ExposedCommunication float64 `json:"exposed_communication"`
	WaitingForCPU        float64 `json:"waiting_for_cpu"`
	Tail                 float64 `json:"tail"`
	ComputeAlone         float64 `json:"compute_alone"`
	CPUIssue             float64 `json:"cpu_issue"`
	Allocated            int64   `json:"allocated"`
	Reserved             int64   `json:"reserved"`
	Budget               int64   `json:"budget"`
	TokensPerStep        int64   `json:"tokens_per_step"`
	TokensPerStepPerGPU  int64   `json:"tokens_per_step_per_gpu"`
	TokensPerSecondGPU   float64 `json:"tokens_per_second_per_gpu"`
	// The MFU figures are null when the model is not known.
	ModelFLOPsPerToken *float64 `json:"model_flops_per_token"`
	ModelFLOPSPerGPU   *float64 `json:"model_flops_per_second_per_gpu"`
	MFU                *float64 `json:"mfu"`
	HardwareFLOPSGPU   float64  `json:"hardware_flops_per_second_per_gpu"`
	HFU                float64  `json:"hfu"`
	PeakFLOPS          float64  `json:"peak_flops"`
	PeakDType          string   `json:"peak_dtype"`
	// TrainTokens and TrainTime: with -train-tokens, how long the whole
	// cluster takes to train on that many tokens.
	TrainTokens float64 `json:"train_tokens,omitempty"`
	TrainTime   float64 `json:"train_time,omitempty"`
}

// newMetrics reads a simulated step. perToken is the model's FLOPs per
// token by MFU's convention, 0 if the model is not known.
func newMetrics(p *schedule.Plan, sim *schedule.Simulation, perToken, trainTokens float64) metrics {
	b := sim.Breakdown
	t := schedule.NewThroughput(p, sim.StepTime, perToken)
	m := metrics{
		Step: sim.StepTime, Compute: b.Compute, OverlapSlowdown: b.OverlapSlowdown, Optimizer: b.Optimizer,
		FSDPKernels: b.FSDPKernels, ExposedCommunication: b.ExposedComm, WaitingForCPU: b.WaitingForCPU, Tail: b.Tail,
		ComputeAlone: sim.ComputeTime, CPUIssue: sim.CPUTime,
		Allocated: sim.PeakAllocated, Reserved: sim.PeakReserved, Budget: p.Cluster.MemoryBudget,
		TokensPerStep: t.TokensPerStep, TokensPerStepPerGPU: t.TokensPerStepPerGPU, TokensPerSecondGPU: t.TokensPerSecondPerGPU,
		HardwareFLOPSGPU: t.HardwareFLOPS, HFU: t.HFU, PeakFLOPS: t.PeakFLOPS, PeakDType: t.PeakDType.String(),
	}
	if perToken > 0 {
		m.ModelFLOPsPerToken, m.ModelFLOPSPerGPU, m.MFU = &t.ModelFLOPsPerToken, &t.ModelFLOPS, &t.MFU
	}
	if trainTokens > 0 {
		m.TrainTokens, m.TrainTime = trainTokens, t.TrainTime(trainTokens, sim.StepTime)
	}
	return m
}

// planDoc is the JSON of plan and sim (docs/json.md).
type planDoc struct {
	Schema  string `json:"schema"`
	Command string `json:"command"`
	// Output and OutputBytes: the plan file plan wrote.
	Output         string           `json:"output,omitempty"`
	OutputBytes    int64            `json:"output_bytes,omitempty"`
	Model          string           `json:"model"`
	InputSHA256    string           `json:"input_sha256"`
	Cluster        schedule.Cluster `json:"cluster"`
	Train          schedule.Train   `json:"train"`
	Groups         int              `json:"groups"`
	Ops            int              `json:"ops"`
	Metrics        metrics          `json:"metrics"`
	PeakByPool     map[string]int64 `json:"peak_by_pool"`
	ExposedByGroup []groupTime      `json:"exposed_by_group"`
	Warnings       []string         `json:"warnings"`
	// Diagnostics are the warnings placed in the model file: plan's, from
	// the model and the planner; [] from sim, which has no model file.
	Diagnostics []diagDoc    `json:"diagnostics"`
	Tuning      *tuningDoc   `json:"tuning,omitempty"`
	Trace       string       `json:"trace,omitempty"`
	Gates       []gateResult `json:"gates,omitempty"`
}

// tuningDoc is what plan -tune found.
type tuningDoc struct {
	Evaluated    int            `json:"evaluated"`
	Elapsed      float64        `json:"elapsed"`
	Baseline     candidateDoc   `json:"baseline"`
	Best         candidateDoc   `json:"best"`
	Gain         float64        `json:"gain"`
	Significant  bool           `json:"significant"`
	Binding      string         `json:"binding"`
	Usable       int64          `json:"usable"`
	Alternatives []candidateDoc `json:"alternatives"`
	// Failed: candidates that did not plan for a reason other than the
	// budget, by reason.
	Failed []failureDoc `json:"failed"`
	// Pinned is what the model file fixes and what changing each
	// choice would give (advice.go).
	Pinned []pinDoc `json:"pinned"`
	// PinnedEvaluated counts the candidates planned for them.
	PinnedEvaluated int `json:"pinned_evaluated"`
}

// failureDoc is one reason candidates did not plan.
type failureDoc struct {
	Reason    string   `json:"reason"`
	Count     int      `json:"count"`
	Decisions []string `json:"decisions"`
}

// candidateDoc is one plan the tuner tried.
type candidateDoc struct {
	Step                 float64  `json:"step"`
	ExposedCommunication float64  `json:"exposed_communication"`
	Reserved             int64    `json:"reserved"`
	Fits                 bool     `json:"fits"`
	Decisions            []string `json:"decisions"`
}

func newTuningDoc(t *planner.Tuning) *tuningDoc {
	c := func(c planner.Candidate) candidateDoc {
		return candidateDoc{c.StepTime, c.ExposedComm, c.PeakReserved, c.Fits, append([]string{}, c.Decisions...)}
	}
	d := &tuningDoc{Evaluated: t.Evaluated, Elapsed: t.Elapsed.Seconds(), Baseline: c(t.Baseline), Best: c(t.Best),
		Gain: t.Gain(), Significant: t.Significant(), Binding: t.Binding, Usable: t.Usable, Alternatives: []candidateDoc{}}
	for _, a := range t.Alternatives {
		d.Alternatives = append(d.Alternatives, c(a))
	}
	d.Failed = []failureDoc{}
	for _, f := range t.Failed {
		d.Failed = append(d.Failed, failureDoc{f.Reason, f.Count, append([]string{}, f.Decisions...)})
	}
	return d
}

// groupTime is one group's share of a time.
type groupTime struct {
	Group   string  `json:"group"`
	Seconds float64 `json:"seconds"`
}

// newPlanDoc describes a simulated plan.
func newPlanDoc(command string, p *schedule.Plan, sim *schedule.Simulation, m metrics) planDoc {
	d := planDoc{Schema: diff.Schema, Command: command, Model: p.Header.Model, InputSHA256: p.Header.InputSHA256,
		Cluster: p.Cluster, Train: p.Train, Groups: len(p.Groups), Ops: len(p.Ops), Metrics: m,
		PeakByPool: map[string]int64{}, ExposedByGroup: []groupTime{}, Warnings: append([]string{}, p.Warnings...),
		Diagnostics: []diagDoc{}}
	for pool, b := range sim.PeakByPool {
		d.PeakByPool[schedule.Pool(pool).String()] = b
	}
	for g, t := range sim.ExposedByGroup {
		if t > 0 {
			d.ExposedByGroup = append(d.ExposedByGroup, groupTime{p.Groups[g].Label(), t})
		}
	}
	sort.SliceStable(d.ExposedByGroup, func(i, j int) bool { return d.ExposedByGroup[i].Seconds > d.ExposedByGroup[j].Seconds })
	return d
}

// writeJSON writes v indented, as every command's -json does.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // gates read step>+5%, not step\u003e+5%
	return enc.Encode(v)
}
