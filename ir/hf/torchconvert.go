package hf

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
)

// TorchResult is a model file written from a description, and what the
// user should know about it.
type TorchResult struct {
	Text []byte
	// Measured names the compute modules whose costs were measured rather
	// than taken from a kind's formula; Dropped the kinds the importer
	// proposed that did not make the module's parameters exactly.
	Measured, Dropped []string
	// Problems are what the trace could not see (TorchProblem.What by module).
	Problems []TorchProblem
	// Numel is what PyTorch counts: each Parameter once.
	Numel int64
}

// ConvertTorch writes the model file for a description: the module tree,
// parameters and ties exactly as described, identical layers folded into
// repeated blocks, kinds where they reproduce the parameters, measured
// costs elsewhere. The file is loaded and compared with the description
// parameter by parameter before it is returned; a kind that does not
// reproduce its module is dropped and the module measured instead.
func ConvertTorch(d *TorchDescription, opt Options) (*TorchResult, error) {
	if err := opt.fill(); err != nil {
		return nil, err
	}
	t, err := newTorchModel(d, opt)
	if err != nil {
		return nil, err
	}
	t.checkKinds()
	for {
		t.classify()
		t.findLayers()
		text, err := t.file()
		if err != nil {
			return nil, err
		}
		m, err := ir.Load(t.modelName()+".toml", text)
		if err != nil {
			if ir.ExceedsLimits(err) {
				return nil, fmt.Errorf("the model is beyond fsdpc's limits (docs/model-format.md, Limits):\n%v", err)
			}
			if strings.Contains(err.Error(), "form a cycle") {
				// A container never called itself (nn.ModuleDict) whose
				// children run with modules outside it between them.
				return nil, fmt.Errorf("the forward interleaves the children of a container with modules outside it, which a model file's dataflow cannot express (docs/import.md):\n%v", err)
			}
			return nil, fmt.Errorf("internal error: the imported model does not load (please report):\n%v", err)
		}
		bad, why := t.compare(m)
		if bad == nil && m.Stats().Params != d.Numel {
			return nil, fmt.Errorf("internal error: the model file holds %d parameters, PyTorch counts %d (please report)", m.Stats().Params, d.Numel)
		}
		if bad == nil {
			res := &TorchResult{Text: text, Dropped: t.dropped, Problems: d.Problems, Numel: d.Numel}
			for _, name := range t.measuredNames() {
				res.Measured = append(res.Measured, name)
			}
			return res, nil
		}
		k := bad
		for k != nil && k.kind == nil {
			k = k.parent
		}
		if k == nil {
			return nil, fmt.Errorf("internal error: the model file does not reproduce module %q (please report): %s", bad.name(), why)
		}
		kind, _ := k.kind["kind"].(string)
		t.dropped = append(t.dropped, fmt.Sprintf("%s (%s: %s)", k.name(), kind, why))
		k.kind = nil
	}
}

// compare finds the first module whose parameters or registration order
// the loaded file does not reproduce.
func (t *torchModel) compare(m *ir.Model) (*tnode, string) {
	ids := make(map[string]ir.ModuleID, len(m.Modules))
	for i := range m.Modules {
		ids[m.Modules[i].Name] = ir.ModuleID(i)
	}
	holds := make([]bool, len(m.Modules))
	for i := len(m.Modules) - 1; i >= 0; i-- {
		mod := &m.Modules[i]
		if len(mod.Params) > 0 {
			holds[i] = true
		}
		if holds[i] && mod.Parent != ir.NoModule {
			holds[mod.Parent] = true
		}
	}
	total := 0
	for i := range t.d.Modules {
		dm := &t.d.Modules[i]
		n := t.byName[dm.Name]
		total += len(dm.Params)
		id, ok := ids[dm.Name]
		if !ok {
			return n, "module missing from the file"
		}
		mod := &m.Modules[id]
		if len(mod.Params) != len(dm.Params) {
			return n, fmt.Sprintf("%d parameters in the file, %d in PyTorch", len(mod.Params), len(dm.Params))
		}
		for j, pid := range mod.Params {
			p, q := &m.Params[pid], &dm.Params[j]
			tied := ""
			if p.TiedTo != ir.NoParam {
				tied = m.Params[p.TiedTo].Name
			}
			switch {
			case p.Local != q.Name:
				return n, fmt.Sprintf("parameter %d is %s in the file, %s in PyTorch", j, p.Local, q.Name)
			case !slices.Equal(p.Shape, q.Shape):
				return n, fmt.Sprintf("%s has shape %v in the file, %v in PyTorch", p.Name, p.Shape, q.Shape)
			case tied != q.TiedTo:
				return n, fmt.Sprintf("%s is tied to %q in the file, %q in PyTorch", p.Name, tied, q.TiedTo)
			case q.TiedTo == "" && p.DType.String() != q.DType:
				return n, fmt.Sprintf("%s is %s in the file, %s in PyTorch", p.Name, p.DType, q.DType)
			case q.TiedTo == "" && p.RequiresGrad != q.RequiresGrad:
				return n, fmt.Sprintf("%s has requires_grad %v in the file, %v in PyTorch", p.Name, p.RequiresGrad, q.RequiresGrad)
			}
		}
		reg := mod.Registered
		if reg == nil {
			reg = mod.Children
		}
		var got []string
		for _, c := range reg {
			if holds[c] {
				got = append(got, m.Modules[c].Name[len(mod.Name):])
			}
		}
		for j := range got {
			got[j] = strings.TrimPrefix(got[j], ".")
		}
		if !slices.Equal(got, dm.Children) {
			return n, fmt.Sprintf("children registered %v in the file, %v in PyTorch", got, dm.Children)
		}
		if t.ownOutput(n) != mod.OwnOutput {
			return n, fmt.Sprintf("output own is %v in the file, %v in PyTorch", mod.OwnOutput, t.ownOutput(n))
		}
	}
	if total != len(m.Params) {
		return t.root, fmt.Sprintf("%d parameters in the file, %d in PyTorch", len(m.Params), total)
	}
	return nil, ""
}

func (t *torchModel) measuredNames() []string {
	var out []string
	var walk func(n *tnode)
	walk = func(n *tnode) {
		if n.node {
			if n.measured && n.d.AliasOf == "" {
				out = append(out, n.name())
			}
			return
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(t.root)
	return out
}

// measuredReasons says why the importer measured modules whose kind it
// had proposed and then withdrew (a conv with dilation, a module called
// twice): "name: reason", layers' numbers folded into '*' and counted.
func (t *torchModel) measuredReasons() []string {
	var lines []string
	for _, name := range t.measuredNames() {
		if why := t.byName[name].d.MeasuredBecause; why != "" {
			lines = append(lines, fold(name)+"\x00"+why)
		}
	}
	return foldedNotes(lines, ": measured because ", 300)
}

// foldedNotes writes "name\x00text" lines (layers' numbers folded into
// '*') as "name (count)" + sep + text, equal lines once and counted, the
// text cut to limit runes.
func foldedNotes(lines []string, sep string, limit int) []string {
	var out []string
	for _, g := range countFolded(lines) {
		name, text, _ := strings.Cut(g.key, "\x00")
		s := clean(name)
		if g.n > 1 {
			s += fmt.Sprintf(" (%d)", g.n)
		}
		out = append(out, s+sep+cleanN(text, limit)+".")
	}
	return out
}

// kindNotes says, for the modules written with a kind, what the kind
// leaves out of their cost where the importer said so (kinds.not_modelled:
// BLOOM's ALiBi, GPT-NeoX's partial rotary, an unfused core): "name:
// note", layers' numbers folded into '*' and counted.
func (t *torchModel) kindNotes() []string {
	var lines []string
	var walk func(n *tnode)
	walk = func(n *tnode) {
		if n.node {
			if n.kind != nil && n.d.AliasOf == "" && n.d.KindNote != "" {
				lines = append(lines, fold(n.name())+"\x00"+n.d.KindNote)
			}
			return
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(t.root)
	return foldedNotes(lines, ": ", 800)
}

func (t *torchModel) modelName() string {
	s := func(k string) string { v, _ := t.d.Source[k].(string); return v }
	if h := s("hf"); h != "" {
		base := h[strings.LastIndexByte(h, '/')+1:]
		base = strings.TrimSuffix(strings.TrimSuffix(base, ".json"), ".config")
		if base != "" && base != "config" {
			return clean(base)
		}
		if c := s("class"); c != "" {
			return clean(c)
		}
	}
	if c := s("class"); c != "" {
		return clean(c)
	}
	return "imported"
}

// file writes the whole model file.
func (t *torchModel) file() ([]byte, error) {
	w := &writer{}
	name := t.modelName()
	w.wrap("", fmt.Sprintf("%s: imported by `fsdpc import torch` (%s), traced on the meta device at micro_batch %d × seq_len %d.",
		name, t.d.describeSourceLine(), t.d.MicroBatch, t.d.SeqLen))
	w.comment("")
	w.wrap("", "Modules, parameters (names, shapes, dtypes, requires_grad), ties and registration order are PyTorch's own; the dataflow is what one forward pass read. Modules fsdpc has a kind for carry that kind's cost model; the rest carry FLOPs measured with FlopCounterMode and activation bytes measured with saved-tensor hooks (docs/import.md).")
	if ms := t.measuredNames(); len(ms) > 0 {
		w.comment("")
		w.wrap("", fmt.Sprintf("Measured, not recognised (%d): %s.", len(ms), summarize(ms)))
		for _, r := range t.measuredReasons() {
			w.wrap("  - ", r)
		}
	}
	if ns := t.kindNotes(); len(ns) > 0 {
		w.comment("")
		w.wrap("", "Recognised, with what their kind's cost model leaves out:")
		for _, s := range ns {
			w.wrap("  - ", s)
		}
	}
	if len(t.dropped) > 0 {
		w.comment("")
		w.wrap("", "Kinds proposed and refused (they did not make exactly these parameters): "+strings.Join(t.dropped, "; ")+".")
	}
	if len(t.d.Problems) > 0 {
		w.comment("")
		w.comment("Not seen by the trace:")
		for _, p := range t.d.Problems {
			w.wrap("  - ", fmt.Sprintf("%s %s", displayName(p.Module), cleanN(p.What, 400)))
		}
	}
	if x := t.unattributed(); x > 0 {
		w.comment("")
		w.wrap("", fmt.Sprintf("%.4g forward FLOPs run in containers' own code (between their children) and are in no module of this file.", x))
	}
	w.comment("")
	w.wrap("", "[train], [cluster] and [policy] are a starting point: edit them, or import again with --seq-len, --micro-batch, --checkpointing, --gpu, --world-size and --gpus-per-node.")

	if reg := t.register(t.root); reg != nil {
		w.line("")
		w.fields([]field{{"register", reg, "the root's children in registration order; [[module]] is forward order"}})
	}
	w.table("model", field{"name", name, ""}, field{"dtype", t.dtype, "the parameters' own dtype"})
	w.table("train",
		field{"micro_batch", t.d.MicroBatch, ""},
		field{"seq_len", t.d.SeqLen, ""},
		field{"grad_accum", 1, ""},
		field{"checkpointing", t.opt.Checkpointing, ""},
		field{"optimizer", "adamw", ""})
	w.table("cluster",
		field{"gpu", t.opt.GPU, ""},
		field{"gpus_per_node", t.opt.GPUsPerNode, ""},
		field{"world_size", t.opt.WorldSize, ""})
	pol := []field{}
	if len(t.layerLists) > 0 {
		var globs []string
		for _, l := range t.layerLists {
			globs = append(globs, globQuote(l.name())+".*")
		}
		pol = append(pol, field{"units", globs, "each layer an FSDP unit, the root takes the rest"})
	}
	pol = append(pol, field{"param_dtype", "bf16", ""}, field{"reduce_dtype", "fp32", ""})
	w.table("policy", pol...)

	t.params(w, "param", t.root)
	if err := t.modulesText(w, "module", t.root.fwd, t.root); err != nil {
		return nil, err
	}
	for _, sig := range t.blockOrder {
		w.b.WriteString(t.blockText[sig])
	}
	return []byte(w.b.String()), nil
}

// globQuote escapes a module name's glob characters, so a glob naming it
// matches it alone.
func globQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func displayName(s string) string {
	if s == "" {
		return "(root)"
	}
	return clean(s)
}

// summarize lists names, folding repeated layers' numbers into '*'.
func summarize(names []string) string {
	folded := make([]string, len(names))
	for i, n := range names {
		folded[i] = fold(n)
	}
	var out []string
	for _, g := range countFolded(folded) {
		if g.n > 1 {
			out = append(out, fmt.Sprintf("%s (%d)", clean(g.key), g.n))
		} else {
			out = append(out, clean(g.key))
		}
	}
	return strings.Join(out, ", ")
}

// fold writes a module name's layer numbers as '*'.
func fold(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		if p != "" && strings.Trim(p, "0123456789") == "" {
			parts[i] = "*"
		}
	}
	return strings.Join(parts, ".")
}

type foldedCount struct {
	key string
	n   int
}

// countFolded counts equal keys, in the order each first appears.
func countFolded(keys []string) []foldedCount {
	var out []foldedCount
	at := map[string]int{}
	for _, k := range keys {
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, foldedCount{key: k})
		}
		out[i].n++
	}
	return out
}

// unattributed is the forward FLOPs measured in containers but in none of
// their children.
func (t *torchModel) unattributed() float64 {
	sum := 0.0
	// incl is a module's measured forward FLOPs; a container forward never
	// called itself (an nn.ModuleList) has its children's.
	var incl func(n *tnode) float64
	incl = func(n *tnode) float64 {
		if n.d.Calls > 0 {
			return n.d.FlopsFwd
		}
		s := 0.0
		for _, c := range n.children {
			s += incl(c)
		}
		return s
	}
	var walk func(n *tnode)
	walk = func(n *tnode) {
		if n.node {
			return
		}
		own := incl(n)
		for _, c := range n.children {
			own -= incl(c)
			walk(c)
		}
		if own > 0 {
			sum += own
		}
	}
	walk(t.root)
	return sum
}

// checkKinds loads each proposed kind alone, in a file of one module, and
// drops those that do not make exactly the module's parameters (names,
// shapes and registration order below it). Modules with the same kind
// keys and parameters are checked once.
func (t *torchModel) checkKinds() {
	verdict := map[string]string{}
	var walk func(n *tnode)
	walk = func(n *tnode) {
		if n.kind != nil && n.d.AliasOf == "" {
			fs, err := t.kindFields(n)
			why := ""
			if err != nil {
				why = err.Error()
			} else {
				w := &writer{}
				w.line("[train]\nseq_len = 16\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 1\n[[module]]")
				var keep []field
				for _, f := range fs {
					if f.key != "tied_to" && f.key != "bias_tied_to" {
						keep = append(keep, f)
					}
				}
				w.fields(append([]field{{"name", "m", ""}}, keep...))
				if err := t.heldText(w, "module", n); err != nil {
					why = err.Error()
				} else {
					want := strings.Join(t.subtreeShapes(n, ""), "\n")
					key := w.b.String() + "\x00" + want
					v, ok := verdict[key]
					if !ok {
						v = kindVerdict(w.b.String(), want)
						verdict[key] = v
					}
					why = v
				}
			}
			if why != "" {
				kind, _ := n.kind["kind"].(string)
				t.dropped = append(t.dropped, fmt.Sprintf("%s (%s: %s)", n.name(), kind, why))
				n.kind = nil
			} else {
				return
			}
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(t.root)
}

// subtreeShapes lists n's parameters in PyTorch's order (named_parameters:
// own, then each child's in registration order) as "name shape".
func (t *torchModel) subtreeShapes(n *tnode, prefix string) []string {
	var out []string
	for _, p := range n.d.Params {
		out = append(out, fmt.Sprintf("%s%s %v", prefix, p.Name, p.Shape))
	}
	for _, c := range n.children {
		out = append(out, t.subtreeShapes(c, prefix+c.local+".")...)
	}
	return out
}

func kindVerdict(file, want string) string {
	m, err := ir.Load("kind.toml", []byte(file))
	if err != nil {
		msg := err.Error()
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return msg
	}
	var got []string
	var walk func(id ir.ModuleID, prefix string)
	walk = func(id ir.ModuleID, prefix string) {
		mod := &m.Modules[id]
		for _, pid := range mod.Params {
			p := &m.Params[pid]
			got = append(got, fmt.Sprintf("%s%s %v", prefix, p.Local, p.Shape))
		}
		reg := mod.Registered
		if reg == nil {
			reg = mod.Children
		}
		for _, c := range reg {
			name := m.Modules[c].Name
			walk(c, prefix+name[strings.LastIndexByte(name, '.')+1:]+".")
		}
	}
	if len(m.Modules) < 2 {
		return "the kind made no module"
	}
	walk(1, "")
	if g := strings.Join(got, "\n"); g != want {
		return fmt.Sprintf("it makes [%s], PyTorch has [%s]", strings.ReplaceAll(g, "\n", "; "), strings.ReplaceAll(want, "\n", "; "))
	}
	return ""
}
