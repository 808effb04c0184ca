package main

import (
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/executor/launch"
)

// TestDeviceOrdinal: the GPU a worker opens under each way a launcher
// binds GPUs. Slurm with --gpus-per-task gives every task its own
// CUDA_VISIBLE_DEVICES, so LOCAL_RANK (SLURM_LOCALID) 3 must open
// ordinal 0, not 3.
func TestDeviceOrdinal(t *testing.T) {
	node := func(local, world int) launch.Env { return launch.Env{LocalRank: local, LocalWorld: world} }
	for _, c := range []struct {
		name    string
		flag    int
		virtual bool
		env     launch.Env
		visible string
		count   int
		want    int
		err     string
	}{
		{"per node, unset", -1, false, node(3, 8), "", 8, 3, ""},
		{"per node, listed", -1, false, node(3, 8), "0,1,2,3,4,5,6,7", 8, 3, ""},
		{"per node, listed by UUID", -1, false, node(1, 2), "GPU-aaa,GPU-bbb", 2, 1, ""},
		{"per task, one GPU each", -1, false, node(3, 8), "3", 1, 0, ""},
		{"per task, two GPUs each", -1, false, node(3, 4), "6,7", 2, 0, ""},
		{"one process", -1, false, node(0, 1), "", 1, 0, ""},
		{"a rehearsal", -1, true, launch.Env{}, "", 8, 0, ""},
		{"--device", 5, false, node(3, 8), "", 8, 5, ""},
		{"--device beyond the visible", 2, false, node(0, 1), "4,5", 2, 0, `sees 2 GPU(s) (ordinals 0 to 1, CUDA_VISIBLE_DEVICES="4,5")`},
		{"no GPU visible", -1, false, node(0, 1), "-1", 0, 0, `CUDA_VISIBLE_DEVICES="-1" leaves this process no GPU`},
		{"no GPU", -1, false, node(0, 1), "", 0, 0, "the driver shows no GPU"},
		{"more ranks than GPUs, unset", -1, false, node(5, 8), "", 4, 0, "local rank 5 of 8 on this node, but this process sees 4 GPU(s)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "CUDA_VISIBLE_DEVICES" {
					return c.visible
				}
				return ""
			}
			got, err := deviceOrdinal(c.flag, c.virtual, c.env, getenv, c.count)
			switch {
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("got %d, %v; want the error %q", got, err, c.err)
				}
			case err != nil || got != c.want:
				t.Errorf("got %d, %v; want %d", got, err, c.want)
			}
		})
	}
}
