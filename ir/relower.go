package ir

import "fmt"

// Relower builds the model again from its source with changed settings:
// change edits the decoded [train], [cluster] and [policy] before the
// modules are lowered, so costs follow (checkpointing changes every
// module's FLOPs and saved activations). The autotuner uses it to try
// settings the policy leaves open.
func (m *Model) Relower(change func(*Model)) (*Model, error) {
	if m.src == nil {
		return nil, fmt.Errorf("model %s has no source to lower again", m.Name)
	}
	return load(m.File, m.src, change)
}
