package torchgen

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/checkpoint"
)

// TestCheckpointConformance saves real FSDP2 state with
// torch.distributed.checkpoint and compares DCP's metadata with the
// layout fsdpc derives from the plan: entries, sizes, dtypes, chunks and
// the rank that writes each (its deduplication of HSDP replicas and step
// counts included). Like TestConformance it needs
// FSDPC_TORCH_CONFORMANCE=1.
func TestCheckpointConformance(t *testing.T) {
	py := needTorch(t)
	for _, c := range []struct {
		name, optimizer string
		confCase
	}{
		{"adamw-ws4-empty-ranks", "adamw", confCase{cluster: "world_size = 4"}},
		{"adamw-ws3-uneven", "adamw", confCase{cluster: "world_size = 3"}},
		{"adamw-hsdp-2x2", "adamw", confCase{cluster: "world_size = 4\nmesh = { replicate = 2, shard = 2 }"}},
		{"sgd-momentum-frozen-embedding", "sgd_momentum", confCase{cluster: "world_size = 2", emb: "requires_grad = false", train: `optimizer = "sgd_momentum"`}},
		{"adamw-tied-merge", "adamw", confCase{cluster: "world_size = 2", policy: `tied = "merge"` + "\n" + `units = ["layers.*", "output"]`, head: `tied_to = "emb.weight"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := fmt.Sprintf(decoderModel, c.train, c.cluster, c.policy, c.emb, c.head)
			if strings.Contains(c.policy, "units = [") {
				src = strings.Replace(src, "units = \"blocks\"\n", "", 1)
			}
			s, p := planSpec(t, c.name+".toml", src)
			s.Checkpoint = c.optimizer
			recs, err := Launch(py, s, 3*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			l, err := checkpoint.FromPlan(p)
			if err != nil {
				t.Fatal(err)
			}
			if bad := CompareCheckpoint(l, recs[0].Checkpoint); len(bad) > 0 {
				t.Errorf("DCP (torch %s) differs from fsdpc's checkpoint layout:\n%s", recs[0].Torch, strings.Join(bad, "\n"))
			}
		})
	}
}
