package ir

import (
	"os"
	"testing"
)

func TestLoadLlama(t *testing.T) {
	src, err := os.ReadFile("../plans/llama3-8b.toml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load("llama3-8b.toml", src)
	if err != nil {
		t.Fatal(err)
	}
	s := m.Stats()
	t.Logf("params %d trainable %d modules %d forward %d flops fwd %g bwd %g act %d", s.Params, s.Trainable, len(m.Modules), len(m.Forward), s.FlopsFwd, s.FlopsBwd, s.ActivationBytes)
	if s.Params != 8030261248 {
		t.Errorf("params = %d", s.Params)
	}
}
