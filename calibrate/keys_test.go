package calibrate

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// TestParametersAreProfileKeys: the constants a fit adjusts are exactly
// the profile keys with a fit range (hardware.ProfileKeys), besides the
// compound "attention"; a key given a fit range in the table but not
// listed here, or listed here but not fitted there, fails.
func TestParametersAreProfileKeys(t *testing.T) {
	var fitted, params []string
	for _, k := range hardware.ProfileKeys() {
		if k.Fit.Fitted() {
			fitted = append(fitted, k.Name)
		}
	}
	for _, p := range Parameters {
		if p.Name != "attention" {
			params = append(params, p.Name)
		}
	}
	slices.Sort(params)
	if !slices.Equal(fitted, params) {
		t.Errorf("fit parameters %v, profile keys with a fit range %v", params, fitted)
	}
}

// TestProfileRoundTrip: a profile WriteProfile writes is one ir reads
// back, every constant in it reaches the cost model's calibration, and
// nothing in it is dropped on the way: the writer, ir's reader and the
// cost model agree on the keys.
func TestProfileRoundTrip(t *testing.T) {
	cal := hardware.CalibrationFor("NVIDIA H100 SXM5 80GB")
	cal.MaxEfficiency, cal.AttentionForward, cal.AttentionBackward = 0.61, 0.41, 0.31
	cal.NICEfficiency, cal.MemoryEfficiency, cal.Overlap = 0.81, 0.71, 0.21
	var buf bytes.Buffer
	if err := WriteProfile(&buf, &Fit{GPU: "h100-sxm", Cal: cal}, "test"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "h100.profile.toml"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "model.toml")
	src := []byte("[train]\nmicro_batch = 1\nseq_len = 8\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 8\nprofile = \"h100.profile.toml\"\n[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n")
	m, err := ir.Load(path, src)
	if err != nil {
		t.Fatalf("%v\nprofile:\n%s", err, buf.String())
	}
	if len(m.Cluster.Profile) != len(Parameters)-1 {
		t.Errorf("ir read %d constants, the fit writes %d:\n%s", len(m.Cluster.Profile), len(Parameters)-1, buf.String())
	}
	got := hardware.CalibrationFor("NVIDIA H100 SXM5 80GB")
	if err := schedule.ApplyProfile(&got, m.Cluster.Profile); err != nil {
		t.Fatal(err)
	}
	if got != cal {
		t.Errorf("calibration after the round trip %+v, want %+v", got, cal)
	}
}
