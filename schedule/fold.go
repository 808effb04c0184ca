package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// FoldRepeats shortens a plan's text for reading: a run of at least
// minRepeats consecutive blocks of lines that differ only in numbers, each
// number stepping by a constant stride from block to block (the groups
// layers.0 … layers.31, the ops of each layer's forward), prints once,
// wrapped in "N× {" … "}", with each stepping number written as a range:
// "layers.{0..31}", or "{0,2,..,30}" for a stride of 2. Numbers that do not
// step (sizes, dtypes) print as they are, so nothing is lost but the
// repetition; FoldRepeats never folds lines whose numbers change otherwise.
func FoldRepeats(lines []string) []string {
	tmpl := make([]int, len(lines)) // template id: the line with its numbers blanked
	nums := make([][]int64, len(lines))
	ids := map[string]int{}
	for i, l := range lines {
		t, n := splitNumbers(l)
		id, ok := ids[t]
		if !ok {
			id = len(ids)
			ids[t] = id
		}
		tmpl[i], nums[i] = id, n
	}
	var out []string
	for i := 0; i < len(lines); {
		period, reps := bestRun(tmpl, nums, i)
		if reps < minRepeats {
			out = append(out, lines[i])
			i++
			continue
		}
		indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " "))]
		out = append(out, fmt.Sprintf("%s%d× {", indent, reps))
		for k := 0; k < period; k++ {
			out = append(out, "  "+foldLine(lines[i+k], nums, i+k, period, reps))
		}
		out = append(out, indent+"}")
		i += period * reps
	}
	return out
}

// minRepeats is the fewest blocks a fold replaces; maxPeriod the longest
// block looked for (a decoder layer's forward is 18 to 40 lines).
const (
	minRepeats = 3
	maxPeriod  = 256
)

// bestRun finds, at line i, the block length and repeat count that cover
// the most lines, preferring the shorter block on a tie.
func bestRun(tmpl []int, nums [][]int64, i int) (period, reps int) {
	best := 0
	for p := 1; p <= maxPeriod && i+minRepeats*p <= len(tmpl); p++ {
		r := 1
		for i+(r+1)*p <= len(tmpl) && sameTemplates(tmpl, i, i+r*p, p) && steps(nums, i, p, r) {
			r++
		}
		if r >= minRepeats && r*p > best {
			best, period, reps = r*p, p, r
		}
	}
	return period, reps
}

func sameTemplates(tmpl []int, a, b, p int) bool {
	for k := 0; k < p; k++ {
		if tmpl[a+k] != tmpl[b+k] {
			return false
		}
	}
	return true
}

// steps reports whether block r (of period p from line i) continues every
// number's arithmetic progression set by blocks 0 and 1.
func steps(nums [][]int64, i, p, r int) bool {
	if r < 2 {
		return true // blocks 0 and 1 define the strides
	}
	for k := 0; k < p; k++ {
		a, b, c := nums[i+k], nums[i+p+k], nums[i+r*p+k]
		for j := range a {
			if c[j]-a[j] != int64(r)*(b[j]-a[j]) {
				return false
			}
		}
	}
	return true
}

// foldLine writes line (the first block's line at index at) with every
// number that steps across the blocks as its range.
func foldLine(line string, nums [][]int64, at, period, reps int) string {
	first, second := nums[at], nums[at+period]
	var b strings.Builder
	j, prev := 0, 0
	for _, r := range numberRuns(line) {
		b.WriteString(line[prev:r.start])
		prev = r.end
		stride := second[j] - first[j]
		last := first[j] + int64(reps-1)*stride
		switch {
		case stride == 0:
			b.WriteString(line[r.start:r.end])
		case stride == 1:
			fmt.Fprintf(&b, "{%d..%d}", first[j], last)
		default:
			fmt.Fprintf(&b, "{%d,%d,..,%d}", first[j], first[j]+stride, last)
		}
		j++
	}
	b.WriteString(line[prev:])
	return b.String()
}

// splitNumbers blanks a line's numbers ("#") and returns them.
func splitNumbers(line string) (string, []int64) {
	var b strings.Builder
	var nums []int64
	prev := 0
	for _, r := range numberRuns(line) {
		b.WriteString(line[prev:r.start])
		b.WriteByte('#')
		nums = append(nums, r.value)
		prev = r.end
	}
	b.WriteString(line[prev:])
	return b.String(), nums
}

type numberRun struct {
	start, end int
	value      int64
}

// numberRuns finds a line's decimal numbers. A run with a leading zero
// ("02" in "416.02 MiB") would lose its width in a range, and one too long
// for int64 cannot step: both stay text.
func numberRuns(line string) []numberRun {
	var runs []numberRun
	for i := 0; i < len(line); {
		if !isDigit(line[i]) {
			i++
			continue
		}
		end := i
		for end < len(line) && isDigit(line[end]) {
			end++
		}
		if n, err := strconv.ParseInt(line[i:end], 10, 64); err == nil && (end-i == 1 || line[i] != '0') {
			runs = append(runs, numberRun{i, end, n})
		}
		i = end
	}
	return runs
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
