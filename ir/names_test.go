package ir

import "testing"

// TestValidNames: the model format's name rules, which plan.bin's reader
// applies too (schedule's Check).
func TestValidNames(t *testing.T) {
	for _, tc := range []struct {
		s           string
		path, label bool
	}{
		{"", true, true},
		{"layers.0.attn.wq", true, true},
		{"a-b_c", true, true},
		{"a..b", false, true},
		{".a", false, true},
		{"a b", false, true},
		{"NVIDIA A100 SXM4 80GB", false, true},
		{"x\nopen('p')", false, false},
		{"\x1b[2J", false, false},
		{"\u202e", false, false},
		{"bad\xff", false, false},
		{"é", false, true},
	} {
		if got := ValidPath(tc.s) == nil; got != tc.path {
			t.Errorf("ValidPath(%q) ok = %v, want %v", tc.s, got, tc.path)
		}
		if got := ValidLabel(tc.s) == nil; got != tc.label {
			t.Errorf("ValidLabel(%q) ok = %v, want %v", tc.s, got, tc.label)
		}
	}
}
