package gpu

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// scripted returns its samples in turn and fails past their end.
type scripted struct {
	samples []MemorySample
	calls   int
}

func (s *scripted) Sample() (MemorySample, error) {
	s.calls++
	if s.calls > len(s.samples) {
		return MemorySample{}, errors.New("nvmlDeviceGetMemoryInfo: ERROR_UNKNOWN")
	}
	return s.samples[s.calls-1], nil
}

// TestMemSampling drives the sampler goroutine on synctest's fake clock,
// so the number of ticks is exact: a sample at start, one per interval,
// one at stop; the peak and this process's peak are the largest seen (the
// driver's reserved part taken from the peak's sample); an error stops
// the goroutine by itself; and after stop nothing samples any more (a
// goroutine left running would fail synctest.Test).
func TestMemSampling(t *testing.T) {
	const GiB = 1 << 30
	s := func(used, reserved int64, proc ...int64) MemorySample {
		x := MemorySample{Used: used * GiB, Total: 80 * GiB, Reserved: reserved * GiB}
		if len(proc) > 0 {
			x.Process, x.HasProcess = proc[0]*GiB, true
		}
		return x
	}
	cases := []struct {
		name    string
		samples []MemorySample
		wait    time.Duration // before stop, at a 1 ms interval
		want    MemoryFigures
		calls   int
		err     bool
	}{
		{
			name:    "peak in the middle",
			samples: []MemorySample{s(2, 1), s(5, 1, 3), s(9, 2, 4), s(7, 1, 6), s(3, 1)},
			wait:    3500 * time.Microsecond, // start, ticks at 1, 2, 3 ms, stop
			want:    MemoryFigures{Samples: 5, Interval: time.Millisecond, Total: 80 * GiB, Open: 2 * GiB, Peak: 9 * GiB, Reserved: 2 * GiB, Process: 6 * GiB, HasProcess: true},
			calls:   5,
		},
		{
			name:    "no process figures",
			samples: []MemorySample{s(4, 0), s(4, 0)},
			want:    MemoryFigures{Samples: 2, Interval: time.Millisecond, Total: 80 * GiB, Open: 4 * GiB, Peak: 4 * GiB},
			calls:   2,
		},
		{
			name:    "an error stops it",
			samples: []MemorySample{s(2, 0), s(3, 0)},
			wait:    10 * time.Millisecond, // the third sample, at 2 ms, fails
			want:    MemoryFigures{Samples: 2, Interval: time.Millisecond, Total: 80 * GiB, Open: 2 * GiB, Peak: 3 * GiB},
			calls:   3,
			err:     true,
		},
		{
			name:  "the first sample fails",
			want:  MemoryFigures{Interval: time.Millisecond},
			calls: 1,
			err:   true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &scripted{samples: c.samples}
				var m memSampling
				m.start(src, time.Millisecond)
				time.Sleep(c.wait)
				synctest.Wait()
				m.stop()
				m.stop() // Drain, then Close
				time.Sleep(time.Second)
				got := *m.figures()
				if (got.Err != nil) != c.err {
					t.Errorf("error %v, want one: %v", got.Err, c.err)
				}
				got.Err = nil
				if got != c.want || src.calls != c.calls {
					t.Errorf("got %+v after %d calls\nwant %+v after %d", got, src.calls, c.want, c.calls)
				}
			})
		})
	}
}

// TestMemSamplingNone: without a sampler the backend has no figures, and
// stopping is harmless.
func TestMemSamplingNone(t *testing.T) {
	var m memSampling
	m.start(nil, 0)
	m.stop()
	if f := m.figures(); f != nil {
		t.Errorf("figures %+v without a sampler", *f)
	}
}
