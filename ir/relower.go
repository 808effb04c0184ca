package ir

import "fmt"

// Relower builds the model again from its source with changed settings:
// change edits the decoded [train], [cluster] and [policy] before the
// modules are lowered, so costs follow (checkpointing changes every
// module's FLOPs and saved activations). The autotuner uses it to try
// settings the policy leaves open. Changes compose: a model that is
// itself relowered keeps its own change under the new one (the tuner's
// advice tunes a model file with one setting changed).
func (m *Model) Relower(change func(*Model)) (*Model, error) {
	if m.src == nil {
		return nil, fmt.Errorf("model %s has no source to lower again", m.Name)
	}
	return load(m.File, m.src, m.then(change), m.repeats)
}

// then is the model's own change, if any, followed by change.
func (m *Model) then(change func(*Model)) func(*Model) {
	prev := m.changed
	switch {
	case prev == nil:
		return change
	case change == nil:
		return prev
	}
	return func(x *Model) {
		prev(x)
		change(x)
	}
}

// Resized builds the model again from its source with the repeated
// module name holding n instances instead of the count its file declares:
// the same blocks, more or fewer of them, named name.0 … name.n-1. The
// autotuner plans short copies of a deep model to extrapolate a
// candidate's step time. Relower keeps the new count. A model whose
// inputs or policy name instances past n does not load.
func (m *Model) Resized(name string, n int) (*Model, error) {
	if m.src == nil {
		return nil, fmt.Errorf("model %s has no source to lower again", m.Name)
	}
	if n < 1 {
		return nil, fmt.Errorf("model %s: %q cannot repeat %d times", m.Name, name, n)
	}
	repeats := map[string]int{name: n}
	for k, v := range m.repeats {
		if k != name {
			repeats[k] = v
		}
	}
	return load(m.File, m.src, m.changed, repeats)
}
