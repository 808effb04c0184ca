package ir

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestPowerLimit: [cluster] power_limit_w becomes the profile's
// clock_ratio by the cube law against the preset's TDP; a GPU without
// power figures, a limit above the TDP or at the idle draw, and a clock
// given twice are errors naming the key.
func TestPowerLimit(t *testing.T) {
	load := func(gpu, extra string) (*Model, error) {
		src := fmt.Sprintf("[train]\nmicro_batch = 1\nseq_len = 8\n[cluster]\ngpu = %q\nworld_size = 8\n%s\n[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n", gpu, extra)
		return Load("m.toml", []byte(src))
	}
	for _, tc := range []struct {
		gpu   string
		watts int
		want  float64
	}{{"h100-sxm", 500, 0.87825}, {"h200", 700, 1}, {"h100-sxm", 300, 0.70796}} {
		m, err := load(tc.gpu, fmt.Sprintf("power_limit_w = %d", tc.watts))
		if err != nil {
			t.Fatal(err)
		}
		p := m.Cluster.Profile
		if len(p) != 1 || p[0].Name != "clock_ratio" || math.Abs(p[0].Value-tc.want) > 1e-4 {
			t.Errorf("%s at %d W: profile %v, want clock_ratio %.4f", tc.gpu, tc.watts, p, tc.want)
		}
	}
	for _, tc := range []struct {
		gpu, extra, want string
	}{
		{"a100-80gb", "power_limit_w = 300", "power_limit_w needs a GPU preset whose TDP"},
		{"h100-sxm", "power_limit_w = 800", "above the h100-sxm's 700 W TDP"},
		{"h100-sxm", "power_limit_w = 80", "at or below the h100-sxm's 80 W idle draw"},
		{"h100-sxm", "power_limit_w = 500\nsm_clock_mhz = 1500", "power_limit_w and sm_clock_mhz both set the clock"},
		{"h100-sxm", "power_limit_w = 0", "power_limit_w"},
	} {
		_, err := load(tc.gpu, tc.extra)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %q: %v, want %q", tc.gpu, tc.extra, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), "m.toml:") {
			t.Errorf("%s with %q: %v does not name the file and line", tc.gpu, tc.extra, err)
		}
	}
}
