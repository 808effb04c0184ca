package checkpoint

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestFoldedReadsExpand: text and markdown fold runs of ranks that read
// the same (the per-rank table and -reads' lists); expanded, every rank
// has exactly the reads and figures it has unfolded.
func TestFoldedReadsExpand(t *testing.T) {
	for _, c := range []struct{ old, new string }{
		{"4", "8"}, {"8", "4"}, {"12", "3"}, {"4", "24"}, {"1", "12"}, {"2x4", "3x4"}, {"2x12", "2x12"},
	} {
		old, new := meshLayout(t, c.old), meshLayout(t, c.new)
		rs, err := Plan(old, new)
		if err != nil {
			t.Fatal(err)
		}
		st := Presets["nvme"]
		world := new.World()
		want := make([][]string, world)
		for r := range world {
			for _, rd := range rs.Reads(r) {
				want[r] = append(want[r], rs.readLine(rd))
			}
		}
		sums := rs.summaries(rs.Transfer(st))
		for _, format := range []string{"text", "markdown"} {
			var b bytes.Buffer
			var err error
			if format == "text" {
				err = rs.WriteText(&b, st, true)
			} else {
				err = rs.WriteMarkdown(&b, st, true)
			}
			if err != nil {
				t.Fatal(err)
			}
			rows, lists := expandReport(t, format, b.String())
			name := fmt.Sprintf("%s -> %s, %s", c.old, c.new, format)
			if len(rows) != world || len(lists) != world {
				t.Fatalf("%s: %d table ranks and %d read lists, want %d each:\n%s", name, len(rows), len(lists), world, b.String())
			}
			for r := range world {
				s := sums[r]
				if rows[r] != fmt.Sprint(s.Reads) {
					t.Errorf("%s rank %d: table says %s reads, want %d", name, r, rows[r], s.Reads)
				}
				if strings.Join(lists[r], "\n") != strings.Join(want[r], "\n") {
					t.Errorf("%s rank %d reads:\n%s\nwant\n%s", name, r, strings.Join(lists[r], "\n"), strings.Join(want[r], "\n"))
				}
			}
		}
	}
	// The fold is not vacuous: 4 -> 24 ranks has ranks past every row
	// that read only the step counts, one run.
	rs, _ := Plan(meshLayout(t, "4"), meshLayout(t, "24"))
	var b bytes.Buffer
	rs.WriteText(&b, Presets["nvme"], true)
	if !strings.Contains(b.String(), "\nranks ") {
		t.Errorf("4 -> 24: no run of ranks folded:\n%s", b.String())
	}
}

// expandReport reads a reshard report back: each rank's reads count from
// the table and its read lines, runs expanded to one entry per rank.
func expandReport(t *testing.T, format, s string) (reads map[int]string, lists map[int][]string) {
	t.Helper()
	reads, lists = map[int]string{}, map[int][]string{}
	span := func(label string) (int, int) {
		var a, b int
		if n, _ := fmt.Sscanf(label, "%d-%d", &a, &b); n == 2 {
			return a, b
		}
		if _, err := fmt.Sscanf(label, "%d", &a); err != nil {
			t.Fatalf("rank label %q", label)
		}
		return a, a
	}
	var cur []int
	inTable := false
	for _, line := range strings.Split(s, "\n") {
		switch {
		case format == "text" && strings.HasPrefix(line, "  rank     reads"),
			format == "markdown" && strings.HasPrefix(line, "| rank |"):
			inTable = true
		case inTable && format == "text" && strings.HasPrefix(line, "  "),
			inTable && format == "markdown" && strings.HasPrefix(line, "| "):
			f := strings.Fields(strings.NewReplacer("|", " ").Replace(line))
			if f[0] == "---" {
				continue
			}
			a, b := span(f[0])
			for r := a; r <= b; r++ {
				reads[r] = f[1]
			}
		case format == "text" && (strings.HasPrefix(line, "rank ") || strings.HasPrefix(line, "ranks ")),
			format == "markdown" && strings.HasPrefix(line, "<details><summary>rank"):
			inTable = false
			f := strings.Fields(strings.TrimPrefix(line, "<details><summary>"))
			a, b := span(strings.TrimSuffix(f[1], ":"))
			cur = cur[:0]
			for r := a; r <= b; r++ {
				cur = append(cur, r)
				lists[r] = []string{}
			}
		case line == "" || line == "```" || line == "</details>":
			inTable = inTable && line != ""
		case len(cur) > 0:
			for _, r := range cur {
				lists[r] = append(lists[r], strings.TrimPrefix(line, "  "))
			}
		}
	}
	return reads, lists
}
