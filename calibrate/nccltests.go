package calibrate

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/schedule"
)

// NCCLTest is one published nccl-tests result (nccl-tests.csv beside
// this file): a collective of a size over a number of nodes of one GPU
// and network, with the bus bandwidth measured, and the bus bandwidth
// fsdpc's collective model predicts for it.
type NCCLTest struct {
	Source, URL, Figure string
	GPU                 string // preset
	GPUsPerNode, Nodes  int
	NICGbps             float64 // one NIC's line rate, Gb/s; 0 within one node
	NICsPerNode         int
	Collective          string  // all_gather, reduce_scatter, all_reduce
	Bytes               int64   // nccl-tests' size: the whole buffer
	Measured            float64 // busbw, GB/s
	// KnownMiss says why the model is not expected to reach this row
	// (empty: it is held to the tolerance).
	KnownMiss string
	Predicted float64 // busbw, GB/s
}

// NCCLTestTolerance is how far the model's bus bandwidth may be from a
// published one it is held to: 25%.
const NCCLTestTolerance = 0.25

// Err is the predicted bus bandwidth's error against the measured, in %.
func (t NCCLTest) Err() float64 { return pctErr(t.Predicted, t.Measured) }

var ncclTestColumns = []string{"source", "url", "figure", "gpu", "gpus_per_node", "nodes", "nic_gbps", "nics_per_node",
	"collective", "bytes", "busbw_gbps", "known_miss"}

// LoadNCCLTests reads nccl-tests.csv and predicts each row's bus
// bandwidth. Errors name the file, line and column.
func LoadNCCLTests(name string, r io.Reader) ([]NCCLTest, error) {
	cr := csv.NewReader(r)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(h)] = i
	}
	for _, c := range ncclTestColumns {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("%s:1: no column %q", name, c)
		}
	}
	var out []NCCLTest
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		get := func(c string) string { return strings.TrimSpace(rec[col[c]]) }
		num := func(c string) (float64, error) {
			v, err := strconv.ParseFloat(get(c), 64)
			if err != nil || v < 0 || math.IsInf(v, 0) {
				return 0, fmt.Errorf("%s:%d: column %s: %q is not a non-negative number", name, line, c, get(c))
			}
			return v, nil
		}
		t := NCCLTest{Source: get("source"), URL: get("url"), Figure: get("figure"), GPU: get("gpu"),
			Collective: get("collective"), KnownMiss: get("known_miss")}
		var vals [6]float64
		for i, c := range []string{"gpus_per_node", "nodes", "nic_gbps", "nics_per_node", "bytes", "busbw_gbps"} {
			if vals[i], err = num(c); err != nil {
				return nil, err
			}
		}
		t.GPUsPerNode, t.Nodes, t.NICGbps, t.NICsPerNode = int(vals[0]), int(vals[1]), vals[2], int(vals[3])
		t.Bytes, t.Measured = int64(vals[4]), vals[5]
		if t.GPUsPerNode < 1 || t.Nodes < 1 || t.Bytes < 1 || t.Nodes > 1 && (t.NICGbps == 0 || t.NICsPerNode == 0) {
			return nil, fmt.Errorf("%s:%d: a row needs GPUs per node, nodes and bytes, and a network across nodes", name, line)
		}
		if t.Predicted, err = t.predict(); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// predict is the bus bandwidth of the row's collective under the GPU's
// built-in calibration: nccl-tests' algbw = bytes/time, times (n-1)/n for
// all-gather and reduce-scatter and 2(n-1)/n for all-reduce.
func (t NCCLTest) predict() (float64, error) {
	g, ok := hardware.Preset(t.GPU)
	if !ok {
		return 0, fmt.Errorf("no GPU preset %q", t.GPU)
	}
	intra, _ := hardware.Link(g.IntraNode)
	m := &schedule.Model{
		HW: schedule.Hardware{HBMBandwidth: g.HBMBandwidth, IntraNodeBandwidth: intra, GPUsPerNode: t.GPUsPerNode,
			InterNodeBandwidth: t.NICGbps / 8 * 1e9 * float64(t.NICsPerNode) / float64(t.GPUsPerNode)},
		Cal: hardware.CalibrationFor(g.Device),
	}
	n := t.GPUsPerNode * t.Nodes
	frac := float64(n-1) / float64(n)
	var secs float64
	switch t.Collective {
	case "all_gather":
		secs = m.AllGather(t.Bytes, n, 1)
	case "reduce_scatter":
		secs = m.ReduceScatter(t.Bytes, n, 1)
	case "all_reduce":
		secs, frac = m.AllReduce(t.Bytes, n, 1), 2*frac
	default:
		return 0, fmt.Errorf("collective %q is not all_gather, reduce_scatter or all_reduce", t.Collective)
	}
	return float64(t.Bytes) / secs * frac / 1e9, nil
}

// WriteNCCLTests prints the published bus bandwidths beside the model's.
func WriteNCCLTests(w io.Writer, ts []NCCLTest) {
	fmt.Fprintln(w, "| source | GPU | nodes × GPUs | NICs per node | collective | size | measured busbw GB/s | predicted | error | |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
	held, within := 0, 0
	for _, t := range ts {
		nics := "–"
		if t.Nodes > 1 {
			nics = fmt.Sprintf("%d × %.0f Gb/s", t.NICsPerNode, t.NICGbps)
		}
		note := "held to ±25%"
		if t.KnownMiss != "" {
			note = "known miss: " + t.KnownMiss
		} else {
			held++
			if math.Abs(t.Err()) <= 100*NCCLTestTolerance {
				within++
			}
		}
		fmt.Fprintf(w, "| %s | %s | %d × %d | %s | %s | %s | %.1f | %.1f | %+.1f%% | %s |\n", t.Source, t.GPU, t.Nodes, t.GPUsPerNode,
			nics, t.Collective, sizeText(t.Bytes), t.Measured, t.Predicted, t.Err(), note)
	}
	fmt.Fprintf(w, "\nWithin ±25%%: %d of the %d rows held to it\n", within, held)
}

// sizeText is a byte count in the largest binary unit it is a whole
// number of, as nccl-tests' sizes come.
func sizeText(b int64) string {
	for _, u := range []struct {
		n    int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if b >= u.n && b%u.n == 0 {
			return fmt.Sprintf("%d %s", b/u.n, u.name)
		}
	}
	return fmt.Sprintf("%d B", b)
}
