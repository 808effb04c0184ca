package ir

import "strings"

// MFUCounts is what model FLOPs utilization counts of a model, by the
// convention torchtitan's get_nparams_and_flops uses (after PaLM,
// Chowdhery et al. 2022, appendix B): a token costs 6 FLOPs per parameter
// it uses (2 forward, 4 backward) plus the attention core's, which
// torchtitan writes 12·L·H·Q·T per token (L layers, H heads, head dimension
// Q, sequence length T): 2 FLOPs per multiply-add, 2 matmuls forward and 4
// backward, every (query, key) pair counted although a causal kernel skips
// half, FlashAttention's recomputation not counted.
type MFUCounts struct {
	// Params is the parameter count N of 6N: every parameter (tied ones
	// once) less those of embedding modules, with a MoE's routed experts
	// counted at top_k/experts, the share of them a token runs through (as
	// torchtitan's MoE models count active parameters).
	Params float64
	// AttnFlopsDense is the forward FLOPs of every attention core for one
	// micro-batch on one rank, counted over all (query, key) pairs:
	// 4·B·T·T_kv·H·Q for standard attention, 2·B·T²·H·(Q_qk+Q_v) for
	// latent attention. Forward and backward together are three times it.
	AttnFlopsDense float64
}

// FLOPsPerToken is the model FLOPs of one training token (forward and
// backward): 6·Params plus three times the attention core's forward FLOPs
// per token, 12·L·H·Q·T for standard attention.
func (m *Model) FLOPsPerToken() float64 {
	tokens := float64(m.Train.MicroBatch) * float64(m.Train.SeqLen)
	if tokens <= 0 {
		return 0
	}
	return 6*m.MFU.Params + 3*m.MFU.AttnFlopsDense/tokens
}

// mfuParams counts MFUCounts.Params. experts holds the MoE modules'
// work, naming the child with the routed experts and the share of them a
// token visits.
func (m *Model) mfuParams(experts map[ModuleID]work) float64 {
	n := 0.0
	for i := range m.Params {
		p := &m.Params[i]
		if p.TiedTo != NoParam {
			continue
		}
		share := 1.0
		for id := p.Module; id != NoModule; id = m.Modules[id].Parent {
			mod := &m.Modules[id]
			if !mod.Compute {
				continue
			}
			if mod.Kind == KindEmbedding {
				share = 0
			} else if w, ok := experts[id]; ok && strings.HasPrefix(p.Name, joinName(mod.Name, w.experts)+".") {
				share = w.expertShare
			}
			break
		}
		n += share * float64(p.Numel)
	}
	return n
}
