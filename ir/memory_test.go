package ir

import (
	"strings"
	"testing"
)

// TestGPUMemory: [cluster.gpu] memory sets the profile's
// elementwise_efficiency to the share measured on that memory (an H100
// with HBM2e gets the HBM2e share, not its preset's HBM3 one); a profile
// file's value would win; an unknown memory is an error naming the file,
// line and the generations fsdpc knows.
func TestGPUMemory(t *testing.T) {
	load := func(gpu string) (*Model, error) {
		src := "[train]\nmicro_batch = 1\nseq_len = 8\n[cluster]\ngpu = " + gpu + "\nworld_size = 8\n[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n"
		return Load("m.toml", []byte(src))
	}
	for _, tc := range []struct {
		gpu  string
		want float64 // 0: no profile value
	}{
		{`{ preset = "h100-sxm", hbm_bandwidth = "2.4TB/s", memory = "HBM2e" }`, 0.519},
		{`{ preset = "a100-80gb", memory = "HBM3" }`, 0.539},
		{`{ preset = "h100-sxm", hbm_bandwidth = "2.4TB/s" }`, 0},
		{`"h100-sxm"`, 0},
	} {
		m, err := load(tc.gpu)
		if err != nil {
			t.Fatalf("%s: %v", tc.gpu, err)
		}
		var got float64
		for _, v := range m.Cluster.Profile {
			if v.Name == "elementwise_efficiency" {
				got = v.Value
			}
		}
		if got != tc.want {
			t.Errorf("%s: elementwise_efficiency %v, want %v (profile %v)", tc.gpu, got, tc.want, m.Cluster.Profile)
		}
	}
	_, err := load(`{ preset = "h100-sxm", memory = "GDDR6" }`)
	if err == nil || !strings.Contains(err.Error(), `m.toml:5:39: cluster.gpu.memory`) || !strings.Contains(err.Error(), `memory "GDDR6": fsdpc knows the element-wise share of HBM2e, HBM3`) {
		t.Errorf("unknown memory: %v", err)
	}
}
