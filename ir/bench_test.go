package ir

import (
	"fmt"
	"strings"
	"testing"
)

// llamaTOML writes a Llama-architecture model file.
func llamaTOML(layers, dim, heads, kvHeads, ffn, vocab int) string {
	return fmt.Sprintf(`
[train]
seq_len = 8192
checkpointing = "full"
[cluster]
gpu = "h100-sxm"
world_size = 16384
mesh = { replicate = 128, shard = 128 }
[policy]
param_dtype = "bf16"
reduce_dtype = "fp32"
[[module]]
name = "tok_embeddings"
kind = "embedding"
num = %[6]d
dim = %[2]d
[[module]]
name = "layers"
repeat = %[1]d
[[module.module]]
name = "attention_norm"
kind = "norm"
dim = %[2]d
[[module.module]]
name = "attention"
kind = "attention"
dim = %[2]d
heads = %[3]d
kv_heads = %[4]d
[[module.module]]
name = "ffn_norm"
kind = "norm"
dim = %[2]d
[[module.module]]
name = "feed_forward"
kind = "mlp"
dim = %[2]d
hidden = %[5]d
[[module]]
name = "norm"
kind = "norm"
dim = %[2]d
[[module]]
name = "output"
kind = "linear"
in = %[2]d
out = %[6]d
`, layers, dim, heads, kvHeads, ffn, vocab)
}

func TestLlama405BCount(t *testing.T) {
	m, err := Load("405b.toml", []byte(llamaTOML(126, 16384, 128, 8, 53248, 128256)))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Stats().Params; got != 405_853_388_800 {
		t.Errorf("params = %d, want 405,853,388,800", got)
	}
}

// BenchmarkLoadLlama405B measures parsing, checking and lowering a 405B
// model file (126 layers, ~1,900 modules).
func BenchmarkLoadLlama405B(b *testing.B) {
	src := []byte(llamaTOML(126, 16384, 128, 8, 53248, 128256))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load("405b.toml", src); err != nil {
			b.Fatal(err)
		}
	}
}

// repeatedTOML declares a block of four norms once and repeats it: the
// model has 5·n+1 modules.
func repeatedTOML(n int) string {
	return header + fmt.Sprintf(`
[[module]]
name = "layers"
repeat = %d
[[module.module]]
name = "a"
kind = "norm"
dim = 64
[[module.module]]
name = "b"
kind = "norm"
dim = 64
[[module.module]]
name = "c"
kind = "norm"
dim = 64
[[module.module]]
name = "d"
kind = "norm"
dim = 64
`, n)
}

// spelledOutTOML writes every module out: n modules, no repeat.
func spelledOutTOML(n int) string {
	var b strings.Builder
	b.WriteString(header)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "[[module]]\nname = \"m%d\"\nkind = \"norm\"\ndim = 64\n", i)
	}
	return b.String()
}

// BenchmarkLoadModules reports time and memory for generated models of 10k
// and 100k modules, declared with repeat and spelled out, so linearity can
// be read off side by side.
func BenchmarkLoadModules(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, form := range []struct {
			name string
			src  string
		}{
			{"repeat", repeatedTOML(n / 5)},
			{"spelled", spelledOutTOML(n)},
		} {
			b.Run(fmt.Sprintf("%s/%d", form.name, n), func(b *testing.B) {
				src := []byte(form.src)
				b.ReportAllocs()
				for b.Loop() {
					m, err := Load("gen.toml", src)
					if err != nil {
						b.Fatal(err)
					}
					if len(m.Modules) < n {
						b.Fatalf("%d modules", len(m.Modules))
					}
				}
			})
		}
	}
}
