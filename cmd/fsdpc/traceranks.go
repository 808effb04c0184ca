package main

import (
	"fmt"
	"strconv"
	"strings"
)

// traceRanksDefault is how many ranks a trace draws when --trace-ranks is
// not given: all of a small world, else the first node's.
const traceRanksDefault = 8

// parseRanks reads --trace-ranks: "all", or a comma-separated list of ranks
// and inclusive ranges ("0,3,8-15"). "" picks the default for the world.
func parseRanks(spec string, world, gpusPerNode int) ([]int, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		n := world
		if n > traceRanksDefault {
			n = max(min(gpusPerNode, world), 1)
		}
		return seq(0, n-1), nil
	}
	if spec == "all" {
		return seq(0, world-1), nil
	}
	seen := make(map[int]bool)
	var out []int
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("--trace-ranks %q: %q is not a rank or a range like 8-15", spec, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("--trace-ranks %q: %q is not a range like 8-15", spec, part)
			}
		}
		if a < 0 || b >= world {
			return nil, fmt.Errorf("--trace-ranks %q: %q is outside the plan's ranks 0-%d", spec, part, world-1)
		}
		for r := a; r <= b; r++ {
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func seq(a, b int) []int {
	out := make([]int, 0, b-a+1)
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

// rankList says which ranks a trace draws.
func rankList(ranks []int, world int) string {
	if len(ranks) == world {
		return fmt.Sprintf("all %d ranks", world)
	}
	if len(ranks) == 1 {
		return fmt.Sprintf("rank %d of %d", ranks[0], world)
	}
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = strconv.Itoa(r)
	}
	return fmt.Sprintf("ranks %s of %d", strings.Join(parts, ","), world)
}
