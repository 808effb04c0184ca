// Command sidebyside runs the same go test benchmarks from two test
// binaries (before and after a change), alternating between them so both
// see the same load, and prints each benchmark's median time, bytes and
// allocations per op, and the ratio before/after. On a shared machine the
// alternation matters more than the count: a burst of load hits both.
//
//	go test -c -o /tmp/before.test ./planner   # at the old commit
//	go test -c -o /tmp/after.test ./planner    # at the new one
//	go run ./bench/sidebyside -bench 'Plan405B$|Tune405B' -count 7 /tmp/before.test /tmp/after.test
//
// With one binary it prints medians alone (the table in docs/performance.md).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	bench := flag.String("bench", ".", "benchmark regexp (go test -bench)")
	count := flag.Int("count", 5, "runs per binary, alternated")
	benchtime := flag.String("benchtime", "", "go test -benchtime, if set")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: sidebyside [-bench re] [-count n] before.test [after.test]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	bins := flag.Args()
	if len(bins) < 1 || len(bins) > 2 {
		flag.Usage()
		os.Exit(2)
	}
	// results[bin][benchmark][metric] = samples
	results := make([]map[string]map[string][]float64, len(bins))
	var order []string
	seen := map[string]bool{}
	for i := range results {
		results[i] = map[string]map[string][]float64{}
	}
	for run := 0; run < *count; run++ {
		for i, bin := range bins {
			args := []string{"-test.run", "^$", "-test.bench", *bench, "-test.benchmem", "-test.count", "1"}
			if *benchtime != "" {
				args = append(args, "-test.benchtime", *benchtime)
			}
			cmd := exec.Command(bin, args...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "sidebyside: %s: %v\n%s", bin, err, out.String())
				os.Exit(1)
			}
			sc := bufio.NewScanner(&out)
			for sc.Scan() {
				name, metrics, ok := parse(sc.Text())
				if !ok {
					continue
				}
				if !seen[name] {
					seen[name] = true
					order = append(order, name)
				}
				if results[i][name] == nil {
					results[i][name] = map[string][]float64{}
				}
				for unit, v := range metrics {
					results[i][name][unit] = append(results[i][name][unit], v)
				}
			}
		}
	}
	fmt.Printf("medians of %d runs", *count)
	if len(bins) == 2 {
		fmt.Printf(", alternated; ratio = before/after (>1: after is better)")
	}
	fmt.Println()
	for _, name := range order {
		for _, unit := range units(results, name) {
			a := median(results[0][name][unit])
			line := fmt.Sprintf("%-44s %-10s %14s", name, unit, human(a, unit))
			if len(bins) == 2 {
				b := median(results[1][name][unit])
				ratio := "-"
				if b > 0 {
					ratio = fmt.Sprintf("%.2fx", a/b)
				}
				line += fmt.Sprintf(" %14s %8s", human(b, unit), ratio)
			}
			fmt.Println(line)
		}
	}
	exponents(order, results)
}

// exponents fits, for each family of sub-benchmarks named key=N, the
// exponent b of time ∝ N^b (least squares on the logs of the medians):
// how the cost scales with depth or world size.
func exponents(order []string, results []map[string]map[string][]float64) {
	type point struct{ x, y float64 }
	fams := map[string][][]point{}
	var famOrder []string
	for _, name := range order {
		i := strings.LastIndex(name, "=")
		if i < 0 {
			continue
		}
		n, err := strconv.ParseFloat(name[i+1:], 64)
		if err != nil || n <= 0 {
			continue
		}
		fam := name[:i]
		if fams[fam] == nil {
			fams[fam] = make([][]point, len(results))
			famOrder = append(famOrder, fam)
		}
		for b := range results {
			if t := median(results[b][name]["ns/op"]); t > 0 {
				fams[fam][b] = append(fams[fam][b], point{math.Log(n), math.Log(t)})
			}
		}
	}
	for _, fam := range famOrder {
		line := fmt.Sprintf("%-44s %-10s", fam+"N", "exponent")
		for _, pts := range fams[fam] {
			if len(pts) < 2 {
				line += fmt.Sprintf(" %14s", "-")
				continue
			}
			var sx, sy, sxx, sxy float64
			for _, p := range pts {
				sx, sy, sxx, sxy = sx+p.x, sy+p.y, sxx+p.x*p.x, sxy+p.x*p.y
			}
			k := float64(len(pts))
			line += fmt.Sprintf(" %14.2f", (k*sxy-sx*sy)/(k*sxx-sx*sx))
		}
		fmt.Println(line)
	}
}

// units lists the metrics to print for a benchmark: time, bytes and
// allocations per op, then the ones it reports itself (b.ReportMetric,
// such as ms/step: times, so before/after reads as for ns/op), but not the
// throughput MB/s, which only restates ns/op.
func units(results []map[string]map[string][]float64, name string) []string {
	out := []string{"ns/op", "B/op", "allocs/op"}
	var extra []string
	for _, r := range results {
		for unit := range r[name] {
			if !slices.Contains(out, unit) && !slices.Contains(extra, unit) && unit != "MB/s" {
				extra = append(extra, unit)
			}
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}

// parse reads one benchmark result line: name, iterations, then value-unit
// pairs.
func parse(line string) (string, map[string]float64, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
		return "", nil, false
	}
	name := f[0]
	if i := strings.LastIndex(name, "-"); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i] // the GOMAXPROCS suffix
		}
	}
	m := map[string]float64{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false
		}
		m[f[i+1]] = v
	}
	return name, m, true
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func human(v float64, unit string) string {
	switch unit {
	case "ns/op":
		switch {
		case v >= 1e9:
			return fmt.Sprintf("%.3f s", v/1e9)
		case v >= 1e6:
			return fmt.Sprintf("%.2f ms", v/1e6)
		case v >= 1e3:
			return fmt.Sprintf("%.1f µs", v/1e3)
		}
		return fmt.Sprintf("%.0f ns", v)
	case "B/op":
		switch {
		case v >= 1<<20:
			return fmt.Sprintf("%.1f MiB", v/(1<<20))
		case v >= 1<<10:
			return fmt.Sprintf("%.1f KiB", v/(1<<10))
		}
		return fmt.Sprintf("%.0f B", v)
	}
	if unit == "allocs/op" {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4g", v)
}
