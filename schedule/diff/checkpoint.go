package diff

import (
	"errors"
	"fmt"

	"github.com/fsdpc/fsdpc/checkpoint"
	"github.com/fsdpc/fsdpc/ir"
)

// CheckpointChange says whether the new plan can load the old plan's
// checkpoint (package checkpoint, docs/checkpoint.md) and, when it can but
// the chunks moved, what the load reads.
type CheckpointChange struct {
	Compatible bool `json:"compatible"`
	// Mismatches are the first entries that differ ("fqn: reason"),
	// MismatchCount all of them.
	Mismatches    []string `json:"mismatches,omitempty"`
	MismatchCount int      `json:"mismatch_count,omitempty"`
	// ReadBytes is what the new ranks read in all, MovedBytes the part of
	// it from a file another rank wrote, MaxRankBytes the most one rank
	// reads.
	ReadBytes    int64 `json:"read_bytes,omitempty"`
	MovedBytes   int64 `json:"moved_bytes,omitempty"`
	MaxRankBytes int64 `json:"max_rank_bytes,omitempty"`
	// Error is set when a plan's checkpoint layout cannot be derived.
	Error string `json:"error,omitempty"`
}

const shownMismatches = 5

// checkpoint compares the plans' checkpoints: nothing when the new plan
// loads the old checkpoint chunk for chunk.
func (r *Result) checkpoint() {
	old, err := checkpoint.FromPlan(r.Old.Plan)
	if err == nil {
		var nl *checkpoint.Layout
		if nl, err = checkpoint.FromPlan(r.New.Plan); err == nil {
			r.checkpointOf(old, nl)
			return
		}
	}
	r.Checkpoint = &CheckpointChange{Error: err.Error()}
}

func (r *Result) checkpointOf(old, new *checkpoint.Layout) {
	rs, err := checkpoint.Plan(old, new)
	var ie *checkpoint.IncompatibleError
	if errors.As(err, &ie) {
		c := &CheckpointChange{MismatchCount: len(ie.Mismatches)}
		for i, m := range ie.Mismatches {
			if i == shownMismatches {
				break
			}
			c.Mismatches = append(c.Mismatches, m.String())
		}
		r.Checkpoint = c
		return
	} else if err != nil {
		r.Checkpoint = &CheckpointChange{Error: err.Error()}
		return
	}
	if sameChunks(rs) {
		return
	}
	c := &CheckpointChange{Compatible: true}
	for nr := range new.World() {
		var rank int64
		for _, rd := range rs.Reads(nr) {
			rank += rd.Bytes
			if rd.OldRank != nr {
				c.MovedBytes += rd.Bytes
			}
		}
		c.ReadBytes += rank
		c.MaxRankBytes = max(c.MaxRankBytes, rank)
	}
	r.Checkpoint = c
}

// sameChunks reports whether two layouts of the same state cut every entry
// into the same chunks: a new rank then loads what its shard index saved,
// and nothing is resharded (an added or removed HSDP replica only reads
// copies).
func sameChunks(rs *checkpoint.Reshard) bool {
	if rs.Old.Shard != rs.New.Shard {
		return false
	}
	for i := range rs.New.Tensors {
		a, b := &rs.Old.Tensors[rs.OldTensor(i)], &rs.New.Tensors[i]
		if a.ShardDim != b.ShardDim || a.ChunkRows != b.ChunkRows {
			return false
		}
	}
	return true
}

// checkpointLines renders the change.
func (c *CheckpointChange) lines() []string {
	switch {
	case c == nil:
		return nil
	case c.Error != "":
		return []string{"not derived: " + c.Error}
	case !c.Compatible:
		out := []string{fmt.Sprintf("incompatible: the new plan cannot load the old checkpoint; %d entries differ", c.MismatchCount)}
		out = append(out, c.Mismatches...)
		if c.MismatchCount > len(c.Mismatches) {
			out = append(out, fmt.Sprintf("… %d more (fsdpc reshard lists them)", c.MismatchCount-len(c.Mismatches)))
		}
		return out
	}
	return []string{fmt.Sprintf("resharded on load: the new ranks read %s, %s of it from files other ranks wrote; at most %s per rank (fsdpc reshard lists the reads)",
		ir.FormatBytes(c.ReadBytes), ir.FormatBytes(c.MovedBytes), ir.FormatBytes(c.MaxRankBytes))}
}

// summaryText is the one-line form.
func (c *CheckpointChange) summaryText() string {
	switch {
	case c.Error != "":
		return "not derived: " + c.Error
	case !c.Compatible:
		s := fmt.Sprintf("incompatible: %d entries differ", c.MismatchCount)
		if len(c.Mismatches) > 0 {
			s += " (" + c.Mismatches[0] + ")"
		}
		return s
	}
	return fmt.Sprintf("resharded on load: %s read, %s from other ranks' files", ir.FormatBytes(c.ReadBytes), ir.FormatBytes(c.MovedBytes))
}
