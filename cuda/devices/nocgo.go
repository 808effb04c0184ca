//go:build !cgo

package devices

// Without cgo there is no NVML (see the package doc).

// List returns ErrNoCgo.
func List() (Info, error) { return Info{}, ErrNoCgo }

// Sampler reads one GPU's memory through NVML, which a binary without cgo
// does not have.
type Sampler struct{}

// OpenSampler returns ErrNoCgo.
func OpenSampler(id string) (*Sampler, error) { return nil, ErrNoCgo }

// Sample returns ErrNoCgo.
func (*Sampler) Sample() (MemorySample, error) { return MemorySample{}, ErrNoCgo }

// Close does nothing.
func (*Sampler) Close() error { return nil }
