package gpu_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/executor/gpu/gputest"
)

// memInfoSampler stands in for NVML on the CPU device: it reads the
// device's MemInfo, as NVML reads the driver's, and calls all of it this
// process's. From the failAt-th sample on (0: never) it fails.
type memInfoSampler struct {
	dev    *gputest.Device
	failAt int64
	calls  atomic.Int64
}

func (s *memInfoSampler) Sample() (gpu.MemorySample, error) {
	n := s.calls.Add(1)
	if s.failAt > 0 && n >= s.failAt {
		return gpu.MemorySample{}, errors.New("nvmlDeviceGetMemoryInfo: ERROR_GPU_IS_LOST")
	}
	free, total, err := s.dev.MemInfo()
	if err != nil {
		return gpu.MemorySample{}, err
	}
	return gpu.MemorySample{Used: total - free, Total: total, Process: total - free, HasProcess: true}, nil
}

// TestMemorySampling runs a rehearsal with a sampler, a failing one and
// none: the report says what was sampled or why not. The sampler's peak
// must cover the caching allocator's blocks, which the CPU device counts
// as used until Close, as the driver does; the counts do not depend on
// the ticker, since Open and Drain each take a sample themselves.
func TestMemorySampling(t *testing.T) {
	p := plan(t, "gpt2-124m", 1, 1, 2)
	cases := []struct {
		name    string
		failAt  int64  // 0: never; -1: no sampler
		off     string // Options.MemoryOff
		samples bool   // the report has sampled figures
		want    []string
	}{
		{"sampled", 0, "", true, []string{"allocator reserved", "NVML peak − at open", "NVML peak, this process", "samples every 1ms: device peak"}},
		{"fails at once", 1, "", false, []string{"NVML: sampling stopped after 0 samples: sample 1: nvmlDeviceGetMemoryInfo: ERROR_GPU_IS_LOST"}},
		{"fails later", 2, "", true, []string{"NVML peak − at open", "NVML: sampling stopped after 1 samples: sample 2: nvmlDeviceGetMemoryInfo"}},
		{"no driver", -1, "no driver", false, []string{"allocator reserved", "NVML: not sampled (no driver)"}},
		{"no sampler", -1, "", false, []string{"NVML: not sampled (no sampler)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dev := gputest.New(gputest.WithCapacity(4 << 30))
			defer dev.Close()
			opt := gpu.Options{CheckSteps: 1, MemoryInterval: time.Millisecond, MemoryOff: c.off}
			s := &memInfoSampler{dev: dev, failAt: c.failAt}
			if c.failAt >= 0 {
				opt.Memory = s
			}
			_, b, err := rehearse(t, p, 16, 2, opt, dev)
			if err != nil {
				t.Fatal(err)
			}
			m := b.Measurement()
			var sb strings.Builder
			m.Write(&sb)
			out := sb.String()
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the report lacks %q:\n%s", w, out)
				}
			}
			if m.AllocatorReserved <= 0 {
				t.Errorf("allocator reserved %d", m.AllocatorReserved)
			}
			if c.failAt < 0 {
				if m.Memory != nil {
					t.Errorf("figures without a sampler: %+v", *m.Memory)
				}
				return
			}
			f := m.Memory
			if f == nil {
				t.Fatal("no figures from the sampler")
			}
			if calls := s.calls.Load(); int64(f.Samples) > calls {
				t.Errorf("%d samples from %d calls", f.Samples, calls)
			}
			if (f.Err != nil) != (c.failAt > 0) {
				t.Errorf("error %v, want one: %v", f.Err, c.failAt > 0)
			}
			if !c.samples {
				if f.Samples != 0 {
					t.Errorf("%d samples", f.Samples)
				}
				return
			}
			if f.Samples < 1 || f.Total != 4<<30 || f.Peak > f.Total || f.Open > f.Peak || !f.HasProcess {
				t.Errorf("figures %+v", *f)
			}
			// A sampler that kept going saw the end of the run, when the
			// allocator holds every block it ever took.
			if c.failAt == 0 && (f.Samples < 2 || f.Peak < m.AllocatorReserved || f.Process != f.Peak) {
				t.Errorf("peak %d (%d samples), the allocator reserved %d: %+v", f.Peak, f.Samples, m.AllocatorReserved, *f)
			}
		})
	}
}
