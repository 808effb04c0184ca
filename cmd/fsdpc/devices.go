package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/fsdpc/fsdpc/cuda/devices"
	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/ir"
)

// listDevices is devices.List, replaceable in tests.
var listDevices = devices.List

func runDevices(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("devices", flag.ContinueOnError)
	fl.SetOutput(stderr)
	asTOML := fl.Bool("toml", false, "print a [cluster] section for this machine")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc devices [-toml]\n\nLists the local NVIDIA GPUs (through NVML): name, memory, NVLink links, driver.")
		fl.PrintDefaults()
	}
	if code, ok := parseFlags(fl, args); !ok {
		return code
	}
	info, err := listDevices()
	if errors.Is(err, devices.ErrNoDriver) {
		fmt.Fprintf(stderr, "fsdpc devices: %v; planning works without a GPU: name one in [cluster] gpu (fsdpc zoo's models show the presets)\n", err)
		return 1
	}
	if err != nil {
		return reportErr(stderr, fmt.Errorf("fsdpc devices: %w", err))
	}
	if len(info.GPUs) == 0 {
		fmt.Fprintf(stderr, "fsdpc devices: driver %s found, but no GPUs\n", info.Driver)
		return 1
	}
	if *asTOML {
		printClusterTOML(stdout, info)
		return 0
	}
	fmt.Fprintf(stdout, "driver %s, CUDA %s\n", info.Driver, info.CUDA)
	rows := [][]string{{"GPU", "NAME", "MEMORY", "CC", "NVLINKS", "UUID"}}
	for _, g := range info.GPUs {
		rows = append(rows, []string{fmt.Sprint(g.Index), g.Name, ir.FormatBytes(int64(g.MemoryBytes)),
			fmt.Sprintf("%d.%d", g.ComputeMajor, g.ComputeMinor), fmt.Sprint(g.NVLinks), g.UUID})
	}
	printTable(stdout, rows, 2)
	return 0
}

func printClusterTOML(w io.Writer, info devices.Info) {
	g := info.GPUs[0]
	fmt.Fprintf(w, "# From fsdpc devices on this machine: %d × %s, driver %s.\n", len(info.GPUs), g.Name, info.Driver)
	fmt.Fprintln(w, "[cluster]")
	if p := hardware.Recognize(g.Name, float64(g.MemoryBytes)/(1<<30)); p != "" {
		fmt.Fprintf(w, "gpu = %q\n", p)
	} else {
		fmt.Fprintf(w, "gpu = { name = %q, hbm = %d, hbm_bandwidth = \"FILL IN (e.g. 2TB/s)\", flops = { bf16 = \"FILL IN (e.g. 300TFLOPS)\" } }\n", g.Name, g.MemoryBytes)
	}
	fmt.Fprintf(w, "gpus_per_node = %d\n", len(info.GPUs))
	fmt.Fprintf(w, "world_size = %d\n", len(info.GPUs))
	if g.NVLinks == 0 && len(info.GPUs) > 1 {
		fmt.Fprintln(w, "intra_node = \"pcie5\"   # no active NVLink found")
	}
}
