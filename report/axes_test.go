package report

import (
	"strings"
	"testing"
)

func TestNumber(t *testing.T) {
	for _, c := range []struct {
		f    float64
		prec int
		want string
	}{
		{0, 0, "0"}, {999, 0, "999"}, {1000, 0, "1,000"}, {65536, 0, "65,536"}, {1234567.891, 2, "1,234,567.89"},
		{-12345, 0, "-12,345"}, {0.5, 1, "0.5"}, {6070.4, 0, "6,070"},
	} {
		if got := number(c.f, c.prec); got != c.want {
			t.Errorf("number(%v, %d) = %q, want %q", c.f, c.prec, got, c.want)
		}
	}
	if got := commas(int64(8030261248)); got != "8,030,261,248" {
		t.Errorf("commas = %q", got)
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{0.17: 0.2, 0.2: 0.2, 0.21: 0.5, 3: 5, 5: 5, 7: 10, 10: 10, 1234: 2000, 0.0004: 0.0005} {
		if got := niceStep(raw); got < want*(1-1e-12) || got > want*(1+1e-12) {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
}

// Axes tick at 1, 2 or 5 times a power of ten of one unit, from zero.
func TestTicks(t *testing.T) {
	id := func(f float64) float64 { return f }
	for _, c := range []struct {
		step float64
		want string
	}{
		{1.35, "0.0 s|0.2 s|0.4 s|0.6 s|0.8 s|1.0 s|1.2 s"},
		{0.0473, "0 ms|10 ms|20 ms|30 ms|40 ms"},
		{0.00031, "0 µs|50 µs|100 µs|150 µs|200 µs|250 µs|300 µs"},
		{14.2, "0 s|2 s|4 s|6 s|8 s|10 s|12 s|14 s"},
		{0.9, "0 ms|200 ms|400 ms|600 ms|800 ms"},
		{9000, "0 s|2,000 s|4,000 s|6,000 s|8,000 s"},
	} {
		var labels []string
		for _, tk := range timeTicks(c.step, id) {
			labels = append(labels, tk.Label)
		}
		if got := strings.Join(labels, "|"); got != c.want {
			t.Errorf("timeTicks(%v) = %s, want %s", c.step, got, c.want)
		}
	}
	const gib = 1 << 30
	for _, c := range []struct {
		top  float64
		end  float64
		want string
	}{
		{78.9 * gib, 80 * gib, "0 GiB|10 GiB|20 GiB|30 GiB|40 GiB|50 GiB|60 GiB|70 GiB|80 GiB"},
		{95 * gib, 100 * gib, "0 GiB|20 GiB|40 GiB|60 GiB|80 GiB|100 GiB"},
		{141 * gib, 160 * gib, "0 GiB|20 GiB|40 GiB|60 GiB|80 GiB|100 GiB|120 GiB|140 GiB|160 GiB"},
		{300 << 20, 300 << 20, "0 MiB|50 MiB|100 MiB|150 MiB|200 MiB|250 MiB|300 MiB"},
		{1.5 * gib, 1.6 * gib, "0.0 GiB|0.2 GiB|0.4 GiB|0.6 GiB|0.8 GiB|1.0 GiB|1.2 GiB|1.4 GiB|1.6 GiB"},
		{5, 5, "0 B|1 B|2 B|3 B|4 B|5 B"},
	} {
		end, _, labels := byteAxis(c.top)
		if got := strings.Join(labels, "|"); got != c.want || end < c.end*(1-1e-9) || end > c.end*(1+1e-9) {
			t.Errorf("byteAxis(%v): end %v, %s; want end %v, %s", c.top, end, got, c.end, c.want)
		}
	}
}
