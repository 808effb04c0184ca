package report

import (
	"math"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
)

// Axes are labelled at round steps, 1, 2 or 5 times a power of ten of the
// unit the axis is read in, with every label in that one unit and digits
// grouped by thousands: "0 ms, 200 ms, 400 ms", never "0.00 s, 0.27 s".

// niceStep is the smallest 1, 2 or 5 times a power of ten that is at least
// raw (> 0).
func niceStep(raw float64) float64 {
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// decimals is how many digits after the point print step's multiples
// exactly: 0 for 200, 1 for 0.5, 2 for 0.02.
func decimals(step float64) int {
	return max(0, -int(math.Floor(math.Log10(step)+1e-9)))
}

// number prints f with prec digits after the point and its whole part
// grouped by thousands with commas.
func number(f float64, prec int) string {
	s := strconv.FormatFloat(f, 'f', prec, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}

// commas prints an integer grouped by thousands, 1,234,567 (ir.FormatCount,
// for the page's int and int64 figures alike).
func commas[T ~int | ~int64](n T) string { return ir.FormatCount(int64(n)) }

// timeTicks labels a time axis from 0 to step seconds at about eight round
// steps, in the unit step reads best in.
func timeTicks(step float64, x func(float64) float64) []tick {
	if step <= 0 {
		return []tick{{x(0), "0 s"}}
	}
	scale, unit := 1.0, "s"
	switch {
	case step < 1e-3:
		scale, unit = 1e6, "µs"
	case step < 1:
		scale, unit = 1e3, "ms"
	}
	every := niceStep(step * scale / 8)
	prec := decimals(every)
	var out []tick
	for i := 0; float64(i)*every <= step*scale*(1+1e-9); i++ {
		v := float64(i) * every
		out = append(out, tick{x(v / scale), number(v, prec) + " " + unit})
	}
	return out
}

// byteAxis chooses the memory axis for values up to top bytes: a round step
// in binary units (1, 2 or 5 times a power of ten of B, KiB, MiB, GiB or
// TiB) giving four to eight intervals, and the axis's end, top rounded up to
// a whole step, so the highest tick is the axis's top.
func byteAxis(top float64) (end float64, ticks []float64, labels []string) {
	top = math.Max(top, 1)
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	u := 0
	for u < len(units)-1 && top/math.Pow(1024, float64(u+1)) >= 1 {
		u++
	}
	scale := math.Pow(1024, float64(u))
	every := niceStep(top / scale / 8)
	if u == 0 {
		every = math.Max(every, 1)
	}
	n := math.Ceil(top/scale/every - 1e-9)
	prec := decimals(every)
	for i := 0; i <= int(n); i++ {
		v := float64(i) * every
		ticks = append(ticks, v*scale)
		labels = append(labels, number(v, prec)+" "+units[u])
	}
	return n * every * scale, ticks, labels
}
