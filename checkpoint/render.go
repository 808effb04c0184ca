package checkpoint

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
)

// counts is how many parameters and optimizer states the layout holds.
func (l *Layout) counts() (params, states int) {
	for i := range l.Tensors {
		if l.Tensors[i].State == "" {
			params++
		} else {
			states++
		}
	}
	return params, states
}

func (l *Layout) nodes() int { return (l.World() + l.GPUsPerNode - 1) / l.GPUsPerNode }

func gbps(b float64) string { return strconv.FormatFloat(b/1e9, 'g', 4, 64) + " GB/s" }

func secs(s float64) string {
	if s < 1 {
		return strconv.FormatFloat(s*1e3, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(s, 'f', 2, 64) + " s"
}

// WriteSummary prints the checkpoint section of fsdpc show: entries,
// sizes, files and bytes per rank.
func (l *Layout) WriteSummary(w io.Writer) {
	params, states := l.counts()
	m, o := l.Totals()
	fmt.Fprintf(w, "checkpoint (torch.distributed.checkpoint, %d ranks)\n", l.World())
	fmt.Fprintf(w, "  entries    %d model entries, %d optimizer states (%s)\n", params, states, l.Optimizer)
	fmt.Fprintf(w, "  total      %s: model %s, optimizer %s\n", ir.FormatBytes(m+o), ir.FormatBytes(m), ir.FormatBytes(o))
	fmt.Fprintf(w, "  files      1 per rank (%s), and %s on rank 0\n", "__<rank>_0.distcp", MetadataFile)
	lo, hi := int64(-1), int64(0)
	loR, hiR := 0, 0
	for r, wr := range l.rankWrites() {
		if b := wr.model + wr.optim; lo < 0 || b < lo {
			lo, loR = b, r
		}
		if b := wr.model + wr.optim; b > hi {
			hi, hiR = b, r
		}
	}
	if lo == hi {
		fmt.Fprintf(w, "  per rank   %s\n", ir.FormatBytes(hi))
	} else {
		fmt.Fprintf(w, "  per rank   %s (rank %d) … %s (rank %d)\n", ir.FormatBytes(lo), loR, ir.FormatBytes(hi), hiR)
	}
}

// rankRow is one line of a per-rank table; runs of equal lines are
// printed once with their rank range.
type rankRow struct {
	from, to int
	cells    []string
}

func rankRows(n int, cells func(r int) []string) []rankRow {
	var rows []rankRow
	for r := range n {
		c := cells(r)
		if len(rows) > 0 && strings.Join(rows[len(rows)-1].cells, "\x00") == strings.Join(c, "\x00") {
			rows[len(rows)-1].to = r
			continue
		}
		rows = append(rows, rankRow{r, r, c})
	}
	return rows
}

func (r rankRow) label() string {
	if r.from == r.to {
		return strconv.Itoa(r.from)
	}
	return fmt.Sprintf("%d-%d", r.from, r.to)
}

// WriteEstimate prints fsdpc checkpoint's report.
func (l *Layout) WriteEstimate(w io.Writer, e *Estimate, async bool) {
	params, states := l.counts()
	fmt.Fprintf(w, "checkpoint of %s: %d ranks (%d node(s) of %d, mesh %d×%d), optimizer %s\n",
		l.Model, l.World(), l.nodes(), l.GPUsPerNode, l.Replicate, l.Shard, l.Optimizer)
	fmt.Fprintf(w, "  entries   %d model entries, %d optimizer states\n", params, states)
	fmt.Fprintf(w, "  size      model %s, optimizer %s, total %s\n", ir.FormatBytes(e.Model), ir.FormatBytes(e.Optim), ir.FormatBytes(e.Model+e.Optim))
	agg := "no aggregate limit"
	if e.Storage.WriteAggregate > 0 {
		agg = "aggregate write " + gbps(e.Storage.WriteAggregate) + ", read " + gbps(e.Storage.ReadAggregate)
	}
	fmt.Fprintf(w, "  storage   %s: per node write %s, read %s; %s\n", e.Storage.Name, gbps(e.Storage.WritePerNode), gbps(e.Storage.ReadPerNode), agg)
	fmt.Fprintf(w, "  save      %s  (each node writes at %s; host link %s per GPU)\n", secs(e.Save.Time), gbps(e.Save.Rate), gbps(l.HostBandwidth))
	fmt.Fprintf(w, "  load      %s  (each node reads at %s; same plan)\n", secs(e.Load.Time), gbps(e.Load.Rate))
	if async {
		fmt.Fprintf(w, "  async     stages %s per rank, %s per node in pinned host memory; the step stalls %s; the files are written in the background in %s\n",
			ir.FormatBytes(e.StagingBytes), ir.FormatBytes(e.NodeStaging), secs(e.Stall), secs(max(0, e.Save.Time-e.Stall)))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "  rank     model        optimizer    total        files  save        load")
	for _, row := range rankRows(l.World(), func(r int) []string {
		s, ld := e.Save.Ranks[r], e.Load.Ranks[r]
		return []string{ir.FormatBytes(s.ModelBytes), ir.FormatBytes(s.OptimBytes), ir.FormatBytes(s.Bytes()),
			strconv.Itoa(s.Files), secs(s.Time), secs(ld.Time)}
	}) {
		c := row.cells
		fmt.Fprintf(w, "  %-8s %-12s %-12s %-12s %-6s %-11s %s\n", row.label(), c[0], c[1], c[2], c[3], c[4], c[5])
	}
}

// EstimateJSON is fsdpc checkpoint -json.
func (l *Layout) EstimateJSON(w io.Writer, e *Estimate, async bool) error {
	type rank struct {
		Rank                              int
		Through                           int `json:",omitempty"`
		ModelBytes, OptimizerBytes, Bytes int64
		Files                             int
		SaveSeconds, LoadSeconds          float64
		LoadBytes                         int64
	}
	doc := struct {
		Schema                               string `json:"schema"`
		Model, Optimizer                     string
		Ranks, Replicate, Shard, GPUsPerNode int
		ModelBytes, OptimizerBytes           int64
		Storage                              Storage
		SaveSeconds, LoadSeconds             float64
		Async                                bool
		StagingBytesPerRank, StagingPerNode  int64   `json:",omitempty"`
		StallSeconds                         float64 `json:",omitempty"`
		PerRank                              []rank
	}{Schema: "fsdpc.checkpoint/1", Model: l.Model, Optimizer: l.Optimizer, Ranks: l.World(), Replicate: l.Replicate,
		Shard: l.Shard, GPUsPerNode: l.GPUsPerNode, ModelBytes: e.Model, OptimizerBytes: e.Optim, Storage: e.Storage,
		SaveSeconds: e.Save.Time, LoadSeconds: e.Load.Time, Async: async}
	if async {
		doc.StagingBytesPerRank, doc.StagingPerNode, doc.StallSeconds = e.StagingBytes, e.NodeStaging, e.Stall
	}
	// Runs of consecutive ranks with the same figures are one entry whose
	// Through is the run's last rank: 2²⁰ ranks, most holding no rows, are
	// a few entries.
	for r := range l.World() {
		s, ld := e.Save.Ranks[r], e.Load.Ranks[r]
		rk := rank{r, 0, s.ModelBytes, s.OptimBytes, s.Bytes(), s.Files, s.Time, ld.Time, ld.Bytes()}
		if n := len(doc.PerRank); n > 0 {
			last := &doc.PerRank[n-1]
			a, b := *last, rk
			a.Rank, a.Through, b.Rank = 0, 0, 0
			if a == b {
				last.Through = r
				continue
			}
		}
		doc.PerRank = append(doc.PerRank, rk)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// ranges prints a set of ranks compactly: "0-3,6".
func ranges(set map[int]bool) string {
	var rs []int
	for r := range set {
		rs = append(rs, r)
	}
	sort.Ints(rs)
	return rangesOf(rs)
}

// rangesOf prints sorted ranks compactly.
func rangesOf(rs []int) string {
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(rs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		}
		i = j + 1
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// rankSummary is one new rank's reads in brief.
type rankSummary struct {
	Rank               int
	Reads              int
	FromRanks          string
	ModelBytes         int64
	OptimizerBytes     int64
	Bytes, RemoteBytes int64
	LoadSeconds        float64
}

func (rs *Reshard) summaries(t Transfer) []rankSummary {
	out := make([]rankSummary, rs.New.World())
	for r := range out {
		cl, c := rs.class(r), t.Ranks[r]
		out[r] = rankSummary{r, rs.common.reads + cl.own.reads, cl.from, c.ModelBytes, c.OptimBytes, c.Bytes(), c.RemoteBytes, c.Time}
	}
	return out
}

// readsPrint identifies rank r's reads: ranks with equal prints read the
// same boxes of the same files (a 2²⁰-rank plan's ranks past every
// tensor's rows all read just the step counts). It is a hash of every
// read, computed once per class (readclass.go).
func (rs *Reshard) readsPrint(r int) uint64 { return rs.class(r).print }

func (rs *Reshard) header() string {
	o, n := rs.Old, rs.New
	return fmt.Sprintf("%s (%d ranks, mesh %d×%d) -> %s (%d ranks, mesh %d×%d)", o.Model, o.World(), o.Replicate, o.Shard, n.Model, n.World(), n.Replicate, n.Shard)
}

func (rs *Reshard) totals(t Transfer) (read, remote int64) {
	for _, c := range t.Ranks {
		read += c.Bytes()
		remote += c.RemoteBytes
	}
	return read, remote
}

// copyLine says what a load that reads other nodes' files needs first:
// on node-local storage, the copy between nodes the load time leaves out
// and the two together; on shared storage, none. "" when every rank reads
// its own node's files.
func (rs *Reshard) copyLine(st Storage, t Transfer) string {
	c := rs.CrossNodeCopy(st)
	switch {
	case c.Bytes == 0:
		return ""
	case !st.NodeLocal():
		return "none: every node reads the other nodes' files in place on the shared storage"
	}
	return fmt.Sprintf("%s between nodes first, not in the load time: %s (node-local storage: the busiest node receives %s, written at %s, and sends %s, read at %s); copy and load %s",
		ir.FormatBytes(c.Bytes), secs(c.Time), ir.FormatBytes(c.MaxIn), gbps(st.WritePerNode), ir.FormatBytes(c.MaxOut), gbps(st.ReadPerNode), secs(c.Time+t.Time))
}

// readLine prints one read.
func (rs *Reshard) readLine(rd Read) string { return string(rs.appendRead(nil, rd)) }

// appendRead appends readLine's text to b: a 2²⁰-rank report prints
// tens of millions of reads, so without fmt.
func (rs *Reshard) appendRead(b []byte, rd Read) []byte {
	ints := func(b []byte, xs []int64) []byte {
		b = append(b, '[')
		for i, x := range xs {
			if i > 0 {
				b = append(b, ' ')
			}
			b = strconv.AppendInt(b, x, 10)
		}
		return append(b, ']')
	}
	b = append(b, rs.New.Tensors[rd.Tensor].FQN...)
	b = append(b, " <- rank "...)
	b = strconv.AppendInt(b, int64(rd.OldRank), 10)
	b = append(b, " (__"...)
	b = strconv.AppendInt(b, int64(rd.OldRank), 10)
	b = append(b, "_0.distcp) offsets "...)
	b = ints(b, rd.Offsets)
	b = append(b, " lengths "...)
	b = ints(b, rd.Lengths)
	b = append(b, ", "...)
	return append(b, ir.FormatBytes(rd.Bytes)...)
}

// WriteText prints fsdpc reshard's report; with reads, every read.
// Consecutive ranks that read the same boxes of the same files print
// their reads once ("ranks 37-524287 read"), and the text is written
// through one buffer as it is made: a 2²⁰-rank plan's report streams.
func (rs *Reshard) WriteText(w io.Writer, st Storage, reads bool) error {
	bw := bufio.NewWriter(w)
	t := rs.Transfer(st)
	read, remote := rs.totals(t)
	m, o := rs.Old.Totals()
	fmt.Fprintf(bw, "reshard %s\n", rs.header())
	fmt.Fprintf(bw, "  compatible: the same %d state entries; the checkpoint holds %s\n", len(rs.New.Tensors), ir.FormatBytes(m+o))
	fmt.Fprintf(bw, "  reads     %s in all, %s of it from files another node wrote\n", ir.FormatBytes(read), ir.FormatBytes(remote))
	fmt.Fprintf(bw, "  load      %s at %s (each node reads at %s)\n", secs(t.Time), st.Name, gbps(t.Rate))
	if line := rs.copyLine(st, t); line != "" {
		fmt.Fprintf(bw, "  copy      %s\n", line)
	}
	fmt.Fprintln(bw)
	fmt.Fprintln(bw, "  rank     reads  from ranks   model        optimizer    total        remote       load")
	for _, row := range rs.summaryRows(t) {
		c := row.cells
		fmt.Fprintf(bw, "  %-8s %-6s %-12s %-12s %-12s %-12s %-12s %s\n", row.label(), c[0], c[6], c[1], c[2], c[3], c[4], c[5])
	}
	if reads {
		rs.writeReadLists(bw, "  ", func(run rankRow, n int) {
			if run.from == run.to {
				fmt.Fprintf(bw, "\nrank %d reads\n", run.from)
			} else {
				fmt.Fprintf(bw, "\nranks %d-%d read, each\n", run.from, run.to)
			}
		}, "")
	}
	return bw.Flush()
}

// summaryRows are the per-rank table's rows, runs of equal rows folded.
func (rs *Reshard) summaryRows(t Transfer) []rankRow {
	sums := rs.summaries(t)
	return rankRows(len(sums), func(r int) []string {
		s := sums[r]
		// The sources differ from rank to rank; the run shows the first's.
		return []string{strconv.Itoa(s.Reads), ir.FormatBytes(s.ModelBytes), ir.FormatBytes(s.OptimizerBytes),
			ir.FormatBytes(s.Bytes), ir.FormatBytes(s.RemoteBytes), secs(s.LoadSeconds), s.FromRanks}
	})
}

// readRuns folds the new ranks into runs of consecutive ranks that read
// the same boxes of the same files (equal readsPrint): -reads lists each
// run's reads once.
func (rs *Reshard) readRuns() []rankRow {
	var runs []rankRow
	var last uint64
	for r := range rs.New.World() {
		p := rs.readsPrint(r)
		if len(runs) > 0 && p == last {
			runs[len(runs)-1].to = r
			continue
		}
		runs, last = append(runs, rankRow{from: r, to: r}), p
	}
	return runs
}

// writeReadLists writes -reads' lists, one per run of ranks that read the
// same (readRuns): head opens a run's list of n reads, each read is a line
// after indent, and foot closes the list.
func (rs *Reshard) writeReadLists(bw *bufio.Writer, indent string, head func(run rankRow, n int), foot string) {
	var line []byte
	for _, run := range rs.readRuns() {
		reads := rs.Reads(run.from)
		head(run, len(reads))
		for _, rd := range reads {
			line = append(rs.appendRead(append(line[:0], indent...), rd), '\n')
			bw.Write(line)
		}
		bw.WriteString(foot)
	}
}

// WriteMarkdown prints the report for a pull-request comment, folded and
// streamed as WriteText.
func (rs *Reshard) WriteMarkdown(w io.Writer, st Storage, reads bool) error {
	bw := bufio.NewWriter(w)
	t := rs.Transfer(st)
	read, remote := rs.totals(t)
	// The models' names and the storage's come from files and flags:
	// literal text, so the comment gains no heading, link or image.
	fmt.Fprintf(bw, "### Reshard %s\n\n", safetext.Markdown(rs.header()))
	fmt.Fprintf(bw, "Compatible: the same %d state entries. Reads **%s** in all (%s from other nodes); load **%s** at %s.\n\n",
		len(rs.New.Tensors), ir.FormatBytes(read), ir.FormatBytes(remote), secs(t.Time), safetext.Markdown(st.Name))
	if line := rs.copyLine(st, t); line != "" {
		fmt.Fprintf(bw, "Copy between nodes: %s.\n\n", safetext.Markdown(line))
	}
	fmt.Fprintln(bw, "| rank | reads | from ranks | model | optimizer | total | remote | load |")
	fmt.Fprintln(bw, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, row := range rs.summaryRows(t) {
		c := row.cells
		fmt.Fprintf(bw, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", row.label(), c[0], c[6], c[1], c[2], c[3], c[4], c[5])
	}
	if reads {
		rs.writeReadLists(bw, "", func(run rankRow, n int) {
			if run.from == run.to {
				fmt.Fprintf(bw, "\n<details><summary>rank %d: %d reads</summary>\n\n```\n", run.from, n)
			} else {
				fmt.Fprintf(bw, "\n<details><summary>ranks %d-%d: %d reads each</summary>\n\n```\n", run.from, run.to, n)
			}
		}, "```\n</details>\n")
	}
	return bw.Flush()
}

// JSONRead is one read in fsdpc reshard -format json.
type JSONRead struct {
	FQN     string  `json:"fqn"`
	OldRank int     `json:"old_rank"`
	File    string  `json:"file"`
	Offsets []int64 `json:"offsets"`
	Lengths []int64 `json:"lengths"`
	Bytes   int64   `json:"bytes"`
}

// jsonRank is one entry of WriteJSON's Ranks, as encoding/json would
// write it; rankJSON writes the same bytes by hand.
type jsonRank struct {
	rankSummary
	Through int        `json:",omitempty"`
	Reads   []JSONRead `json:"ReadList,omitempty"`
}

// WriteJSON prints the report as JSON; with reads, every read. Runs of
// consecutive ranks with the same figures (and, with reads, the same
// reads) are one entry whose Through is the run's last rank, and the
// entries are written one at a time: a plan of 2²⁰ ranks, most of which
// read only the step counts, is a few entries, not a million.
func (rs *Reshard) WriteJSON(w io.Writer, st Storage, reads bool) error {
	t := rs.Transfer(st)
	read, remote := rs.totals(t)
	cp := rs.CrossNodeCopy(st)
	head, err := json.MarshalIndent(struct {
		Schema             string `json:"schema"`
		Old, New           string
		Compatible         bool
		Storage            Storage
		Bytes, RemoteBytes int64
		LoadSeconds        float64
		// The copy of other nodes' files a node-local load needs first
		// (CrossNodeCopy); CopySeconds is 0 on shared storage.
		CopyBytes, CopyMaxNodeIn, CopyMaxNodeOut int64
		CopySeconds                              float64
	}{Schema: "fsdpc.reshard/1", Old: rs.Old.Model, New: rs.New.Model, Compatible: true, Storage: st,
		Bytes: read, RemoteBytes: remote, LoadSeconds: t.Time,
		CopyBytes: cp.Bytes, CopyMaxNodeIn: cp.MaxIn, CopyMaxNodeOut: cp.MaxOut, CopySeconds: cp.Time}, "", "  ")
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.Write(head[:len(head)-2]) // reopen the object: "\n}"
	bw.WriteString(",\n  \"Ranks\": [")
	enc, err := newRankJSON(rs)
	if err != nil {
		return err
	}
	var buf []byte
	sums := rs.summaries(t)
	same := func(a, b rankSummary) bool { a.Rank, b.Rank = 0, 0; return a == b }
	for i := 0; i < len(sums); {
		j := i + 1
		var print uint64
		if reads {
			print = rs.readsPrint(i)
		}
		for j < len(sums) && same(sums[i], sums[j]) && (!reads || rs.readsPrint(j) == print) {
			j++
		}
		through := 0
		if j-1 > i {
			through = j - 1
		}
		if i > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n    ")
		if buf, err = enc.appendRank(buf[:0], sums[i], through, reads); err != nil {
			return err
		}
		bw.Write(buf)
		i = j
	}
	bw.WriteString("\n  ]\n}\n")
	return bw.Flush()
}

// IncompatibleJSON prints a refusal as JSON.
func IncompatibleJSON(w io.Writer, e *IncompatibleError) error {
	doc := struct {
		Schema     string `json:"schema"`
		Old, New   string
		Compatible bool
		Mismatches []Mismatch
	}{"fsdpc.reshard/1", e.Old, e.New, false, e.Mismatches}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
