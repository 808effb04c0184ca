// Command tuneregret measures the autotuner's regret: for every zoo model
// it runs `fsdpc plan -tune`'s search (coordinate descent, with short-model
// extrapolation) and an exhaustive search over the same knobs, and prints
// how much faster (predicted) the exhaustive search's best plan is. The
// target is a regret of at most 1% on every model (issue #27).
//
//	go run ./bench/tuneregret [-models a,b] [-timeout 20m]
//
// The exhaustive search plans every combination in full, so the large
// models take minutes each on a 2-core machine; -timeout skips a model
// whose exhaustive search has not finished (listed as such).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
)

func main() {
	models := flag.String("models", strings.Join(plans.Names(), ","), "zoo models, comma-separated")
	timeout := flag.Duration("timeout", 20*time.Minute, "per model, for the exhaustive search")
	flag.Parse()
	fmt.Println("| model | -tune step | candidates | time | exhaustive step | candidates | time | regret |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	worst := 0.0
	for _, name := range strings.Split(*models, ",") {
		src, file, ok := plans.Source(name)
		if !ok {
			fmt.Fprintf(os.Stderr, "tuneregret: no zoo model %q\n", name)
			os.Exit(2)
		}
		m, err := ir.Load(file, src)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tuneregret:", err)
			os.Exit(1)
		}
		t0 := time.Now()
		tuned, err := planner.Tune(m, planner.TuneOptions{})
		if err != nil {
			fmt.Printf("| %s | %v |||||||\n", name, err)
			continue
		}
		tuneTime := time.Since(t0)
		done := make(chan *planner.Tuning, 1)
		errc := make(chan error, 1)
		t1 := time.Now()
		go func() {
			all, err := planner.Tune(m, planner.TuneOptions{Exhaustive: true})
			if err != nil {
				errc <- err
				return
			}
			done <- all
		}()
		select {
		case all := <-done:
			regret := (tuned.Best.StepTime - all.Best.StepTime) / all.Best.StepTime * 100
			worst = max(worst, regret)
			fmt.Printf("| %s | %.4f s | %d | %v | %.4f s | %d | %v | %+.2f%% |\n", name, tuned.Best.StepTime, tuned.Evaluated,
				tuneTime.Round(time.Millisecond), all.Best.StepTime, all.Evaluated, time.Since(t1).Round(time.Millisecond), regret)
		case err := <-errc:
			fmt.Printf("| %s | %.4f s | %d | %v | %v |||| \n", name, tuned.Best.StepTime, tuned.Evaluated, tuneTime.Round(time.Millisecond), err)
		case <-time.After(*timeout):
			fmt.Printf("| %s | %.4f s | %d | %v | not finished in %v |||| \n", name, tuned.Best.StepTime, tuned.Evaluated, tuneTime.Round(time.Millisecond), *timeout)
			os.Stdout.Sync()
			// The search cannot be interrupted; the remaining models run
			// beside it, so stop here.
			fmt.Printf("\nworst regret over the finished models: %+.2f%%\n", worst)
			os.Exit(0)
		}
	}
	fmt.Printf("\nworst regret: %+.2f%% (target: at most 1%%)\n", worst)
}
