package ir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttentionKernel: attention_kernel = "cudnn" on Hopper and B200 puts cuDNN's
// attention efficiencies in the cluster's profile; a profile file's own
// attention figures win; a GPU without a figure keeps FlashAttention-2's
// with a warning; an unknown kernel is an error naming the key.
func TestAttentionKernel(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(prof, []byte("[profile]\ngpus = [\"h100-sxm\"]\nattention_forward = 0.4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(gpu, kernel, extra string) (*Model, error) {
		src := fmt.Sprintf("[train]\nmicro_batch = 1\nseq_len = 8\nattention_kernel = %q\n[cluster]\ngpu = %q\nworld_size = 8\n%s\n[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n", kernel, gpu, extra)
		return Load(filepath.Join(dir, "m.toml"), []byte(src))
	}
	for _, tc := range []struct {
		gpu, kernel, extra string
		want               string
		warn               string
	}{
		{"h100-sxm", "cudnn", "", "[{attention_backward 0.5} {attention_forward 0.638}]", ""},
		{"h200", "cudnn", "", "[{attention_backward 0.479} {attention_forward 0.597}]", ""},
		{"b200", "cudnn", "", "[{attention_backward 0.418} {attention_forward 0.532}]", ""},
		{"h100-sxm", "flash2", "", "[]", ""},
		{"h100-sxm", "cudnn", "profile = \"p.toml\"", "[{attention_forward 0.4}]", ""},
		{"a100-80gb", "cudnn", "", "[]", "no measured efficiency of attention_kernel \"cudnn\" on a100-80gb"},
	} {
		m, err := load(tc.gpu, tc.kernel, tc.extra)
		if err != nil {
			t.Fatalf("%s %s %s: %v", tc.gpu, tc.kernel, tc.extra, err)
		}
		if got := fmt.Sprint(m.Cluster.Profile); got != tc.want {
			t.Errorf("%s %s %s: profile %s, want %s", tc.gpu, tc.kernel, tc.extra, got, tc.want)
		}
		warned := m.Warnings != nil && strings.Contains(m.Warnings.Error(), tc.warn)
		if tc.warn != "" && !warned {
			t.Errorf("%s %s: warnings %v, want %q", tc.gpu, tc.kernel, m.Warnings, tc.warn)
		}
	}
	if _, err := load("h100-sxm", "flash9", ""); err == nil || !strings.Contains(err.Error(), "attention_kernel") {
		t.Errorf("unknown kernel: %v", err)
	}
}

// TestSMClock: [cluster] sm_clock_mhz becomes the profile's clock_ratio
// against the clock the preset's peak assumes; a GPU without one, or a
// clock above it, is an error naming the key.
func TestSMClock(t *testing.T) {
	load := func(gpu string, mhz int) (*Model, error) {
		src := fmt.Sprintf("[train]\nmicro_batch = 1\nseq_len = 8\n[cluster]\ngpu = %q\nworld_size = 8\nsm_clock_mhz = %d\n[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n", gpu, mhz)
		return Load("m.toml", []byte(src))
	}
	m, err := load("h100-sxm", 1500)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(m.Cluster.Profile), fmt.Sprint([]ProfileValue{{"clock_ratio", 1500.0 / 1830}}); got != want {
		t.Errorf("profile %s, want %s", got, want)
	}
	for _, tc := range []struct {
		gpu  string
		mhz  int
		want string
	}{{"b200", 1500, "sm_clock_mhz needs a GPU preset"}, {"a100-80gb", 1500, "above the 1410 MHz"}} {
		if _, err := load(tc.gpu, tc.mhz); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s at %d MHz: %v, want %q", tc.gpu, tc.mhz, err, tc.want)
		}
	}
}
