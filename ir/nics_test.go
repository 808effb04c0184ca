package ir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInterNodeNICs: inter_node is one NIC's line rate; the cluster keeps
// each GPU's share of the node's NICs.
func TestInterNodeNICs(t *testing.T) {
	for _, c := range []struct {
		name, cluster string
		want          float64
	}{
		{"h100 default: one ndr400 per GPU", `gpu = "h100-sxm"` + "\nworld_size = 16", 50e9},
		{"a100 default: one hdr200 per GPU", `gpu = "a100-80gb"` + "\nworld_size = 16", 25e9},
		{"four NICs for eight GPUs", `gpu = "h100-sxm"` + "\nworld_size = 16\nnics_per_node = 4", 25e9},
		{"one 400 Gb/s NIC per node", `gpu = "h100-sxm"` + "\nworld_size = 16\nnics_per_node = 1\ninter_node_bandwidth = \"400Gb/s\"", 50e9 / 8},
		{"one node: the intra-node link", `gpu = "h100-sxm"` + "\nworld_size = 8", 450e9},
	} {
		src := "[train]\nmicro_batch = 1\nseq_len = 8\n[cluster]\n" + c.cluster + "\n[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n"
		m, err := Load("nics.toml", []byte(src))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := m.Cluster.InterNodeBandwidth; got != c.want {
			t.Errorf("%s: inter-node share %g B/s, want %g", c.name, got, c.want)
		}
	}
	if _, err := Load("nics.toml", []byte("[train]\nmicro_batch = 1\nseq_len = 8\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 16\nnics_per_node = 0\n[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n")); err == nil {
		t.Error("nics_per_node = 0 was accepted")
	}
}

// TestGPUTableLinkDefaults: a GPU given as figures, with no preset and no
// link figures, gets the documented defaults (PCIe 5 within a node, one
// NDR 400 NIC per GPU, PCIe 4 to the host), never a zero bandwidth.
func TestGPUTableLinkDefaults(t *testing.T) {
	src := "[train]\nmicro_batch = 1\nseq_len = 8\n[cluster]\n" +
		"gpu = { name = \"MyGPU\", hbm = \"80GiB\", hbm_bandwidth = \"3TB/s\", flops = { bf16 = \"900TFLOPS\" } }\nworld_size = 16\n" +
		"[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n"
	m, err := Load("table.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c := m.Cluster
	if c.IntraNodeBandwidth != 64e9 || c.InterNodeBandwidth != 50e9 || c.HostBandwidth != 32e9 {
		t.Errorf("links %g, %g, %g B/s; want 64e9, 50e9, 32e9", c.IntraNodeBandwidth, c.InterNodeBandwidth, c.HostBandwidth)
	}
}

// TestProfile: [cluster] profile names a hardware profile file beside the
// model; its constants come through sorted, and a profile for another GPU,
// an unknown constant or a value out of range is refused at the key.
func TestProfile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("good.toml", "[profile]\ngpus = [\"h100-sxm\", \"h200\"]\nmax_efficiency = 0.7\nattention_forward = 0.4\n")
	write("other.toml", "[profile]\ngpus = [\"a100-80gb\"]\nmax_efficiency = 0.7\n")
	write("unknown.toml", "[profile]\ngpus = [\"h100-sxm\"]\nwarp = 0.7\n")
	write("range.toml", "[profile]\ngpus = [\"h100-sxm\"]\nmax_efficiency = 1.5\n")
	model := func(profile string) string {
		return write("model.toml", "[train]\nmicro_batch = 1\nseq_len = 8\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 8\nprofile = \""+profile+"\"\n[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n")
	}
	load := func(profile string) (*Model, error) {
		path := model(profile)
		src, _ := os.ReadFile(path)
		return Load(path, src)
	}
	m, err := load("good.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []ProfileValue{{"attention_forward", 0.4}, {"max_efficiency", 0.7}}
	if fmt.Sprint(m.Cluster.Profile) != fmt.Sprint(want) {
		t.Errorf("profile %v, want %v", m.Cluster.Profile, want)
	}
	for file, says := range map[string]string{"other.toml": "fitted for a100-80gb", "unknown.toml": `unknown constant "warp"`,
		"range.toml": "outside its range", "missing.toml": "no such file"} {
		if _, err := load(file); err == nil || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "cluster.profile") {
			t.Errorf("%s: %v, want an error at cluster.profile saying %q", file, err, says)
		}
	}
}
