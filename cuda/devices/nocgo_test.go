//go:build !cgo

package devices

import (
	"errors"
	"testing"
)

// TestNoCgo: without cgo, List and OpenSampler say why there is no NVML,
// as the no-driver error the CLI already explains.
func TestNoCgo(t *testing.T) {
	if _, err := List(); !errors.Is(err, ErrNoCgo) || !errors.Is(err, ErrNoDriver) {
		t.Errorf("List: %v, want ErrNoCgo, an ErrNoDriver", err)
	}
	if _, err := OpenSampler("00000000:00:06.0"); !errors.Is(err, ErrNoCgo) {
		t.Errorf("OpenSampler: %v, want ErrNoCgo", err)
	}
}
