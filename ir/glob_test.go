package ir

import (
	"strings"
	"testing"
)

// backtrackSegs is the matcher matchSegs replaced: it tries every split of
// the name at each "**", exponential in their number. Tests keep it as the
// reference the automaton must agree with, on inputs small enough for it.
func backtrackSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if backtrackSegs(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 || !matchSeg(pat[0], name[0]) {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// hostile is the shape that made planning take minutes: many "**" with a
// last segment the name lacks, against a deep name.
func hostile(stars, depth int) (Glob, string) {
	g, err := CompileGlob(strings.Repeat("**.", stars) + "x")
	if err != nil {
		panic(err)
	}
	return g, strings.TrimSuffix(strings.Repeat("layers.", depth), ".")
}

// stepsOf counts the segment comparisons of one match.
func stepsOf(g Glob, name string) (steps int, ok bool) {
	segSteps = &steps
	defer func() { segSteps = nil }()
	return steps, g.Match(name)
}

// A match compares each name segment with each pattern segment at most
// once, whatever the number of "**".
func TestGlobSteps(t *testing.T) {
	for _, c := range []struct{ stars, depth int }{{1, 10}, {6, 30}, {8, 60}, {40, 200}} {
		g, name := hostile(c.stars, c.depth)
		steps, ok := stepsOf(g, name)
		if ok {
			t.Errorf("%s matched %s", g, name)
		}
		if bound := (c.stars + 1) * c.depth; steps > bound {
			t.Errorf("%d stars, %d segments: %d comparisons, more than %d", c.stars, c.depth, steps, bound)
		}
	}
}

// FuzzGlobMatch: the automaton agrees with the backtracking reference
// where the reference is affordable, and never compares more than
// len(pattern)·len(name) segments: a step count, not a time.
func FuzzGlobMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"**.x", "a.b.x"}, {"layers.**.wq", "layers.3.attention.wq"}, {"**.**.**.**.**.**.x", "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a"},
		{"a.**", "a"}, {"**", ""}, {"*.[0-9]", "layers.3"}, {"**.*.**", "a.b"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pat, name string) {
		g, err := CompileGlob(pat)
		if err != nil || pat == "" || name == "" {
			return
		}
		steps, got := stepsOf(g, name)
		segs := strings.Split(name, ".")
		if bound := len(g.segs) * len(segs); steps > bound {
			t.Fatalf("%q against %q: %d segment comparisons, more than %d", pat, name, steps, bound)
		}
		if strings.Count(pat, "**") <= 4 && len(segs) <= 16 && strings.Contains(pat, "**") {
			if want := backtrackSegs(g.segs, segs); got != want {
				t.Fatalf("%q against %q: %v, the reference says %v", pat, name, got, want)
			}
		}
	})
}

// BenchmarkGlobHostile matches six and eight "**" against a 30-segment
// name with the automaton and with the backtracking it replaced.
func BenchmarkGlobHostile(b *testing.B) {
	for _, stars := range []int{6, 8} {
		g, name := hostile(stars, 30)
		segs := strings.Split(name, ".")
		b.Run("automaton/"+strings.Repeat("*", stars), func(b *testing.B) {
			for b.Loop() {
				matchSegs(g.segs, segs)
			}
		})
		b.Run("backtrack/"+strings.Repeat("*", stars), func(b *testing.B) {
			for b.Loop() {
				backtrackSegs(g.segs, segs)
			}
		})
	}
}
