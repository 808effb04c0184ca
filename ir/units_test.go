package ir

import (
	"math"
	"testing"

	"github.com/fsdpc/fsdpc/internal/checked"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"80GiB", 80 << 30, false},
		{"80 GiB", 80 << 30, false},
		{"1.5GB", 1_500_000_000, false},
		{"512MiB", 512 << 20, false},
		{"1024", 1024, false},
		{"2KiB", 2048, false},
		{"1_000B", 1000, false},
		{"80Gb", 0, true}, // bits are not a size
		{"80GB/s", 0, true},
		{"lots", 0, true},
		{"1e30B", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseRates(t *testing.T) {
	tests := []struct {
		in    string
		parse func(string) (float64, error)
		want  float64
	}{
		{"450GB/s", ParseBandwidth, 450e9},
		{"400Gb/s", ParseBandwidth, 50e9},
		{"400Gbps", ParseBandwidth, 50e9},
		{"3.35TB/s", ParseBandwidth, 3.35e12},
		{"1GiB/s", ParseBandwidth, 1 << 30},
		{"989TFLOPS", ParseFLOPS, 989e12},
		{"989 TFLOP/s", ParseFLOPS, 989e12},
		{"2.5TFLOP", ParseFLOP, 2.5e12},
		{"1e12", ParseFLOP, 1e12},
	}
	for _, tt := range tests {
		got, err := tt.parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parse(%q) = %g, %v; want %g", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"450GB", "fast", "450 furlongs/s"} {
		if _, err := ParseBandwidth(bad); err == nil {
			t.Errorf("ParseBandwidth(%q) accepted", bad)
		}
	}
	if _, err := ParseFLOPS("989TB/s"); err == nil {
		t.Error("ParseFLOPS accepted a bandwidth")
	}
}

func TestFormat(t *testing.T) {
	if got := FormatBytes(2281799680); got != "2.13 GiB" {
		t.Errorf("FormatBytes = %q", got)
	}
	if got := FormatBytes(100); got != "100 B" {
		t.Errorf("FormatBytes = %q", got)
	}
	if got := FormatFLOP(1.4055e14); got != "140.55 TFLOP" {
		t.Errorf("FormatFLOP = %q", got)
	}
}

func TestMulInt64(t *testing.T) {
	if _, ok := checked.Mul(1<<32, 1<<31-1); !ok {
		t.Error("2^63 - 2^32 should fit")
	}
	if _, ok := checked.Mul(1<<32, 1<<32); ok {
		t.Error("2^64 must overflow")
	}
	if _, ok := checked.Mul(3037000500, 3037000500); ok {
		t.Error("just over 2^63 must overflow")
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pat, name string
		want      bool
	}{
		{"layers.*", "layers.3", true},
		{"layers.*", "layers.3.attention", false},
		{"layers.**", "layers.3.attention", true},
		{"layers.**", "layers", true},
		{"**.wq", "layers.3.attention.wq", true},
		{"**.wq", "wq", true},
		{"layers.1?", "layers.12", true},
		{"layers.1?", "layers.1", false},
		{"layers.[0-3]", "layers.2", true},
		{"", "", true},
		{"", "layers", false},
		{"*", "", false},
		{"tok_embeddings", "tok_embeddings", true},
		// The in-place walk of globs without "**": segment counts and
		// literal segments.
		{"layers.*.attention", "layers.3.attention", true},
		{"layers.*.attention", "layers.3", false},
		{"layers.*.attention", "layers.3.attention.wq", false},
		{"layers", "layers.3", false},
		{"layers.3", "layers", false},
		{"layers.3", "layers.3", true},
		{"model.layers.*", "model.layers.10", true},
		{"a.b", "a.c", false},
		{`la\yers.*`, "layers.1", true},
	}
	for _, tt := range tests {
		g, err := CompileGlob(tt.pat)
		if err != nil {
			t.Fatalf("CompileGlob(%q): %v", tt.pat, err)
		}
		if got := g.Match(tt.name); got != tt.want {
			t.Errorf("%q.Match(%q) = %v, want %v", tt.pat, tt.name, got, tt.want)
		}
	}
	for _, bad := range []string{"layers..x", "layers.[", ".x"} {
		if _, err := CompileGlob(bad); err == nil {
			t.Errorf("CompileGlob(%q) accepted", bad)
		}
	}
}

func TestLocate(t *testing.T) {
	src := `# comment
[model]
name = "x"   # trailing

[[module]]
name = "a"
kind = "linear"
dims = { in = 4, "out x" = [1,
  2] }

[[module]]
name = """multi
line"""
[[module.module]]
name = 'c'

[block.dec]
[[block.dec.module]]
  name = "n"
`
	locs := locate(src)
	tests := []struct {
		path      string
		line, col int
	}{
		{"model.name", 3, 1},
		{"module[0]", 5, 1},
		{"module[0].kind", 7, 1},
		{`module[0].dims.in`, 8, 10},
		{`module[0].dims."out x"[1]`, 9, 3},
		{"module[1].name", 12, 1},
		{"module[1].module[0].name", 15, 1},
		{"block.dec.module[0].name", 19, 3},
	}
	for _, tt := range tests {
		loc, ok := locs[tt.path]
		if !ok {
			t.Errorf("no location for %s", tt.path)
			continue
		}
		if loc.key.Line != tt.line || loc.key.Col != tt.col {
			t.Errorf("%s at %d:%d, want %d:%d", tt.path, loc.key.Line, loc.key.Col, tt.line, tt.col)
		}
	}
	if v := locs["module[0].kind"].val; v != (Pos{7, 8}) {
		t.Errorf("value of module[0].kind at %v, want 7:8", v)
	}
}

// TestFormatCount: commas every three digits, a sign kept in front of
// them (not "-,123").
func TestFormatCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 8030261248: "8,030,261,248",
		-123456: "-123,456", -1000: "-1,000", -12: "-12", math.MinInt64: "-9,223,372,036,854,775,808"} {
		if got := FormatCount(n); got != want {
			t.Errorf("FormatCount(%d) = %q, want %q", n, got, want)
		}
	}
}
