package ir

import (
	"os"
	"strings"
	"testing"
)

// TestResized: a resized model is the file's model with another number of
// blocks, every block as declared, and Relower keeps the count.
func TestResized(t *testing.T) {
	src, err := os.ReadFile("../plans/llama3-8b.toml")
	if err != nil {
		t.Fatal(err)
	}
	full, err := Load("llama3-8b.toml", src)
	if err != nil {
		t.Fatal(err)
	}
	short, err := full.Resized("layers", 5)
	if err != nil {
		t.Fatal(err)
	}
	count := func(m *Model) (blocks int, last string) {
		for i := range m.Modules {
			if mod := &m.Modules[i]; mod.Instance >= 0 && mod.Parent > 0 && m.Modules[mod.Parent].Name == "layers" {
				blocks, last = blocks+1, mod.Name
			}
		}
		return
	}
	if n, last := count(full); n != 32 || last != "layers.31" {
		t.Fatalf("the file has %d blocks, the last %s; want 32, layers.31", n, last)
	}
	if n, last := count(short); n != 5 || last != "layers.4" {
		t.Errorf("resized to 5: %d blocks, the last %s", n, last)
	}
	// Every block costs what the file's blocks cost; the rest is the same.
	block := func(m *Model, name string) Cost {
		for i := range m.Modules {
			if m.Modules[i].Name == name {
				return m.Modules[i].Cost
			}
		}
		t.Fatalf("no module %s", name)
		return Cost{}
	}
	if a, b := block(full, "layers.4"), block(short, "layers.4"); a.FlopsFwd != b.FlopsFwd || a.ActivationBytes != b.ActivationBytes {
		t.Errorf("layers.4 costs %+v resized, %+v in the file", b, a)
	}
	if a, b := block(full, "output"), block(short, "output"); a.FlopsFwd != b.FlopsFwd {
		t.Errorf("output costs %g resized, %g in the file", b.FlopsFwd, a.FlopsFwd)
	}
	perBlock := 0
	for i := range full.Modules {
		if name := full.Modules[i].Name; name == "layers.0" || strings.HasPrefix(name, "layers.0.") {
			perBlock++
		}
	}
	if got, want := len(full.Modules)-len(short.Modules), 27*perBlock; got != want {
		t.Errorf("the file has %d more modules than the resized model, want 27 blocks of %d", got, perBlock)
	}
	re, err := short.Relower(func(m *Model) { m.Train.Checkpointing = CheckpointNone })
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := count(re); n != 5 {
		t.Errorf("relowered: %d blocks, want the resized 5", n)
	}
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{
		{"layers", 0, "cannot repeat 0 times"},
		{"output", 4, `no repeated module "output"`},
		{"nothing", 4, `no repeated module "nothing"`},
	} {
		if _, err := full.Resized(tc.name, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Resized(%q, %d): %v, want an error saying %s", tc.name, tc.n, err, tc.want)
		}
	}
}

// TestRelowerComposes: a relowered model relowered again, or resized,
// keeps its first change under the new one (the tuner's advice tunes a
// model file with one setting changed, and the tuner relowers it for
// each checkpointing mode or parameter dtype it tries).
func TestRelowerComposes(t *testing.T) {
	src, err := os.ReadFile("../plans/llama3-8b.toml")
	if err != nil {
		t.Fatal(err)
	}
	full, err := Load("llama3-8b.toml", src)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := full.Relower(func(m *Model) { m.Train.MicroBatch = 4 })
	if err != nil {
		t.Fatal(err)
	}
	both, err := batch.Relower(func(m *Model) { m.Train.Checkpointing = CheckpointNone })
	if err != nil {
		t.Fatal(err)
	}
	if both.Train.MicroBatch != 4 || both.Train.Checkpointing != CheckpointNone {
		t.Errorf("relowered twice: micro-batch %d, checkpointing %s; want 4, none", both.Train.MicroBatch, both.Train.Checkpointing)
	}
	if a, b := both.Modules[0].Cost.ActivationBytes, full.Modules[0].Cost.ActivationBytes; a <= b {
		t.Errorf("the root's activations %d with 4× the batch, %d as the file says", a, b)
	}
	short, err := both.Resized("layers", 5)
	if err != nil {
		t.Fatal(err)
	}
	if short.Train.MicroBatch != 4 || short.Train.Checkpointing != CheckpointNone {
		t.Errorf("resized: micro-batch %d, checkpointing %s; want 4, none", short.Train.MicroBatch, short.Train.Checkpointing)
	}
	if full.Train.MicroBatch != 1 || full.Train.Checkpointing != CheckpointFull {
		t.Errorf("the file's model changed: micro-batch %d, checkpointing %s", full.Train.MicroBatch, full.Train.Checkpointing)
	}
}
