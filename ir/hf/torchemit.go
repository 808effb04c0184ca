package hf

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
)

// tnode is one described module while the model file is written.
type tnode struct {
	d        *TorchModule
	local    string
	parent   *tnode
	children []*tnode // registration order
	fwd      []*tnode // forward order: first run, then never run in registration order
	kind     map[string]any
	// node: a compute module of the model file (a kind, or measured with
	// its subtree's parameters below it); inside: strictly below one.
	node, inside bool
	measured     bool
}

func (n *tnode) name() string { return n.d.Name }

// torchModel is the description being written as a model file.
type torchModel struct {
	d      *TorchDescription
	opt    Options
	root   *tnode
	byName map[string]*tnode
	dtype  string // [model] dtype: the parameters' most common
	// blocks are the repeated or shared module bodies, by signature.
	blockOf    map[string]string
	blockText  map[string]string
	blockOrder []string
	blockNames map[string]bool
	layerLists []*tnode
	// folded are the layer lists written as one repeat: the signatures of
	// the blocks their layers cycle through (one when all are identical).
	folded  map[*tnode][]string
	dropped []string // kinds the check refused, as "name (kind)"
}

func newTorchModel(d *TorchDescription, opt Options) (*torchModel, error) {
	t := &torchModel{d: d, opt: opt, byName: make(map[string]*tnode, len(d.Modules))}
	for i := range d.Modules {
		m := &d.Modules[i]
		n := &tnode{d: m, kind: m.Kind}
		if m.Name != "" {
			n.local = m.Name[strings.LastIndexByte(m.Name, '.')+1:]
		}
		t.byName[m.Name] = n
	}
	t.root = t.byName[""]
	for i := range d.Modules {
		m := &d.Modules[i]
		n := t.byName[m.Name]
		for _, c := range m.Children {
			k := t.byName[joinName(m.Name, c)]
			k.parent = n
			n.children = append(n.children, k)
		}
		for _, c := range m.Forward {
			n.fwd = append(n.fwd, t.byName[joinName(m.Name, c)])
		}
		for _, k := range n.children {
			if !slices.Contains(n.fwd, k) {
				n.fwd = append(n.fwd, k)
			}
		}
	}
	for _, m := range d.Modules {
		n := t.byName[m.Name]
		if n != t.root {
			if err := checkTorchName(n); err != nil {
				return nil, err
			}
		}
		for _, p := range m.Params {
			if strings.ContainsAny(p.Name, ".") || validLocal(p.Name) != nil {
				return nil, fmt.Errorf("parameter %q: %v; fsdpc's model format cannot name it", joinName(m.Name, p.Name), validLocal(p.Name))
			}
			if _, ok := ir.ParseDType(p.DType); !ok {
				return nil, fmt.Errorf("parameter %q has dtype %s, which fsdpc's model format has no name for", joinName(m.Name, p.Name), clean(p.DType))
			}
		}
	}
	counts := map[string]int{}
	for _, m := range d.Modules {
		for _, p := range m.Params {
			if p.TiedTo == "" {
				counts[p.DType]++
			}
		}
	}
	t.dtype = "fp32"
	best := -1
	keys := mapsKeys(counts)
	slices.Sort(keys)
	for _, k := range keys {
		if counts[k] > best {
			t.dtype, best = k, counts[k]
		}
	}
	return t, nil
}

func mapsKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

var localName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func validLocal(s string) error {
	if !localName.MatchString(s) {
		return fmt.Errorf("the name %q holds characters other than letters, digits, '_' and '-'", s)
	}
	return nil
}

func checkTorchName(n *tnode) error {
	if err := validLocal(n.local); err != nil {
		return fmt.Errorf("module %q: %v; fsdpc's model format cannot name it", n.name(), err)
	}
	return nil
}

// classify marks the compute modules: those with a kind, and measured
// ones: a module with no kind anywhere below it is one node, its
// parameters held by its subtree, its cost measured.
func (t *torchModel) classify() {
	var walk func(n *tnode, inside bool) bool // reports a kind at or below n
	walk = func(n *tnode, inside bool) bool {
		n.inside = inside
		n.node, n.measured = false, false
		below := false
		for _, c := range n.children {
			if walk(c, inside || n.kind != nil) {
				below = true
			}
		}
		if inside {
			return n.kind != nil || below
		}
		switch {
		case n == t.root:
		case n.kind != nil:
			n.node = true
		case n.d.AliasOf != "" || !below && !layerShaped(n) && !holdsLayers(n):
			n.node, n.measured = true, true
		}
		if n.node {
			for _, c := range n.children {
				markInside(c)
			}
		}
		return n.kind != nil || below
	}
	walk(t.root, false)
}

// layerShaped: n is one layer of a list of layers (children 0 … N-1 that
// have children of their own), which stays a container even with no kind
// inside, so each layer can be an FSDP unit.
func layerShaped(n *tnode) bool {
	p := n.parent
	if p == nil || len(n.children) == 0 {
		return false
	}
	for i, c := range p.children {
		if c.local != strconv.Itoa(i) || len(c.children) == 0 {
			return false
		}
	}
	return true
}

// holdsLayers: a list of layers is at or below n.
func holdsLayers(n *tnode) bool {
	if len(n.children) > 0 && layerShaped(n.children[0]) {
		return true
	}
	for _, c := range n.children {
		if holdsLayers(c) {
			return true
		}
	}
	return false
}

func markInside(n *tnode) {
	n.inside, n.node = true, false
	for _, c := range n.children {
		markInside(c)
	}
}

// emitted is the module of the file that stands for name: itself, or the
// compute module it sits inside.
func (t *torchModel) emitted(name string) *tnode {
	n := t.byName[name]
	for n != nil && n.inside {
		n = n.parent
	}
	return n
}

// inputs is the module's `inputs` key, or nil to leave it out (the
// default: its previous sibling, or for a first child what its parent
// reads). Reads from outside its parent beside reads of a sibling are
// the residual stream, which the format's dataflow leaves implicit.
func (t *torchModel) inputs(n *tnode) ([]string, bool) {
	p := n.parent
	if p == nil {
		return nil, false
	}
	i := slices.Index(p.fwd, n)
	return t.readsOf(n, p, i)
}

func (t *torchModel) readsOf(n, p *tnode, i int) ([]string, bool) {
	inside := map[*tnode]bool{}
	var outside []string
	for _, r := range n.d.Reads {
		e := t.emitted(r)
		if e == nil || e == n || isAncestor(e, n) || isAncestor(n, e) {
			continue
		}
		if s := childOf(p, e); s != nil {
			if s != n {
				inside[s] = true
			}
			continue
		}
		outside = append(outside, e.name())
	}
	if len(inside) > 0 {
		if i > 0 && len(inside) == 1 && inside[p.fwd[i-1]] {
			return nil, false
		}
		var out []string
		for _, s := range p.fwd {
			if inside[s] {
				out = append(out, s.local)
			}
		}
		return out, true
	}
	if len(outside) == 0 {
		if i == 0 && len(p.d.Reads) == 0 {
			return nil, false
		}
		return []string{}, true
	}
	if i == 0 {
		return nil, false
	}
	if t.readsParentInput(n, p) {
		return []string{ir.ParentInput}, true
	}
	slices.Sort(outside)
	return slices.Compact(outside), true
}

// readsParentInput: n reads from outside its container p exactly what p
// reads in the file, so its inputs can say ".." (p's own input) rather
// than name the modules. In a layer those are the previous layer, a
// different module in each: by name, GPT-NeoX's post-attention norm
// (which reads the residual stream beside the attention) would make
// every layer a body of its own and nothing would fold.
func (t *torchModel) readsParentInput(n, p *tnode) bool {
	want, ok := t.fileInput(p)
	if !ok || len(want) == 0 {
		return false
	}
	got := map[*tnode]bool{}
	for _, r := range n.d.Reads {
		e := t.emitted(r)
		if e == nil || e == n || isAncestor(e, n) || isAncestor(n, e) {
			continue
		}
		if childOf(p, e) != nil {
			return false
		}
		got[e] = true
	}
	return maps.Equal(got, want)
}

// fileInput is what n reads as the model file says it (ir's dataflow):
// the modules its inputs name, else its previous sibling in the file,
// else its parent's input; ok is false where that cannot be told
// without the lowered model (a sibling that may compute nothing).
func (t *torchModel) fileInput(n *tnode) (map[*tnode]bool, bool) {
	p := n.parent
	if p == nil {
		return map[*tnode]bool{}, true
	}
	in, has := t.inputs(n)
	if !has {
		i := slices.Index(p.fwd, n)
		if i < 0 {
			return nil, false
		}
		if i == 0 {
			return t.fileInput(p)
		}
		if !computes(p.fwd[i-1]) {
			return nil, false
		}
		return map[*tnode]bool{p.fwd[i-1]: true}, true
	}
	set := map[*tnode]bool{}
	for _, name := range in {
		if name == ir.ParentInput {
			up, ok := t.fileInput(p)
			if !ok {
				return nil, false
			}
			maps.Copy(set, up)
			continue
		}
		var s *tnode
		for _, c := range p.children {
			if c.local == name {
				s = c
			}
		}
		if s == nil {
			s = t.byName[name]
		}
		if s == nil {
			return nil, false
		}
		set[s] = true
	}
	return set, true
}

// computes: n or a module below it is a compute module of the file.
func computes(n *tnode) bool {
	if n.node {
		return true
	}
	return slices.ContainsFunc(n.children, computes)
}

func isAncestor(a, b *tnode) bool {
	for x := b.parent; x != nil; x = x.parent {
		if x == a {
			return true
		}
	}
	return false
}

// childOf is the child of p on the path to e, or nil when e is not below p.
func childOf(p, e *tnode) *tnode {
	for x := e; x != nil; x = x.parent {
		if x.parent == p {
			return x
		}
	}
	return nil
}

// kindKeys is the order a kind's keys are written in.
var kindKeys = []string{"in", "out", "num", "dim", "hidden", "heads", "kv_heads", "head_dim", "q_lora_rank", "kv_lora_rank",
	"qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "norm", "activation", "bias", "qkv_bias", "out_bias", "out_proj", "q_last", "causal",
	"kv_dim", "kv_seq_len", "flash", "qk_norm", "sinks",
	"window", "chunk", "kernel", "input_size", "stride", "padding", "groups"}

var roleOrder = []string{"q", "k", "v", "o", "qkv", "q_a", "q_a_norm", "q_b", "kv_a", "kv_a_norm", "kv_b", "q_norm", "k_norm",
	"router", "experts", "shared", "gate", "up", "down", "gate_up"}

func (t *torchModel) kindFields(n *tnode) ([]field, error) {
	k, _ := n.kind["kind"].(string)
	fs := []field{{"kind", k, ""}}
	keys := make([]string, 0, len(n.kind))
	for key := range n.kind {
		if key != "kind" && key != "names" {
			keys = append(keys, key)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := slices.Index(kindKeys, keys[i]), slices.Index(kindKeys, keys[j])
		if a < 0 || b < 0 {
			return a >= 0 || (b < 0 && keys[i] < keys[j])
		}
		return a < b
	})
	for _, key := range keys {
		v, err := tomlScalar(n.kind[key])
		if err != nil {
			return nil, fmt.Errorf("module %q: kind key %s: %w", n.name(), key, err)
		}
		fs = append(fs, field{key, v, ""})
	}
	if names, ok := n.kind["names"].(map[string]any); ok {
		var ps []pair
		for _, role := range slices.Sorted(func(yield func(string) bool) {
			for r := range names {
				if !yield(r) {
					return
				}
			}
		}) {
			s, ok := names[role].(string)
			if !ok {
				return nil, fmt.Errorf("module %q: kind names.%s is not a string", n.name(), role)
			}
			ps = append(ps, pair{role, s})
		}
		sort.SliceStable(ps, func(i, j int) bool { return roleIndex(ps[i].k) < roleIndex(ps[j].k) })
		fs = append(fs, field{"names", ps, ""})
	}
	// A kind's weight tied to another parameter (tie_word_embeddings), or
	// its bias (BERT's MLM head: decoder.bias is the head's bias).
	for _, p := range n.d.Params {
		switch {
		case p.TiedTo == "":
		case p.Name == "weight":
			fs = append(fs, field{"tied_to", p.TiedTo, "the same Parameter: counted once"})
		case p.Name == "bias":
			fs = append(fs, field{"bias_tied_to", p.TiedTo, "the same Parameter: counted once"})
		}
	}
	rg, dt, uniform := t.subtreeParams(n)
	if uniform && !rg {
		fs = append(fs, field{"requires_grad", false, "frozen"})
	}
	if uniform && dt != t.dtype && dt != "" {
		fs = append(fs, field{"dtype", dt, ""})
	}
	return fs, nil
}

func roleIndex(r string) int {
	if i := slices.Index(roleOrder, r); i >= 0 {
		return i
	}
	return len(roleOrder)
}

// subtreeParams says whether every untied parameter under n has the same
// requires_grad and dtype, and which.
func (t *torchModel) subtreeParams(n *tnode) (rg bool, dt string, uniform bool) {
	first := true
	uniform = true
	var walk func(x *tnode)
	walk = func(x *tnode) {
		for _, p := range x.d.Params {
			if p.TiedTo != "" {
				continue
			}
			if first {
				rg, dt, first = p.RequiresGrad, p.DType, false
			} else if p.RequiresGrad != rg || p.DType != dt {
				uniform = false
			}
		}
		for _, c := range x.children {
			walk(c)
		}
	}
	walk(n)
	if first {
		return true, "", true
	}
	return rg, dt, uniform
}

func tomlScalar(v any) (any, error) {
	switch x := v.(type) {
	case bool, string:
		return x, nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return nil, fmt.Errorf("%v is not an integer", x)
		}
		return int64(x), nil
	case []any: // conv's kernel, stride, padding, input_size: one integer per dimension
		out := make([]int64, len(x))
		for i, e := range x {
			f, ok := e.(float64)
			if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
				return nil, fmt.Errorf("%v is not a list of integers", v)
			}
			out[i] = int64(f)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%T is not a number, string, boolean or list of integers", v)
}

// count turns a measured figure into the integer the format takes.
func count(f float64) int64 {
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Round(f))
}

// text writes the modules of the file: header names the array-of-tables
// path the entries go in ("module", "module.module", "block.B.module").
func (t *torchModel) modulesText(w *writer, header string, kids []*tnode, container *tnode) error {
	for _, n := range kids {
		if err := t.moduleText(w, header, n); err != nil {
			return err
		}
	}
	return nil
}

func (t *torchModel) moduleText(w *writer, header string, n *tnode) error {
	fs := []field{{"name", n.local, ""}}
	in, has := t.inputs(n)
	inField := func() {
		if has {
			fs = append(fs, field{"inputs", in, ""})
		}
	}
	switch {
	case t.folded[n] != nil:
		fs = append(fs, field{"repeat", len(n.children), ""})
		if sigs := t.folded[n]; len(sigs) == 1 {
			fs = append(fs, field{"block", t.blockOf[sigs[0]], ""})
		} else {
			names := make([]string, len(sigs))
			for i, s := range sigs {
				names[i] = t.blockOf[s]
			}
			fs = append(fs, field{"blocks", names, "layer i is blocks[i mod " + strconv.Itoa(len(names)) + "]"})
		}
		inField()
		w.line("")
		w.line("[[" + header + "]]")
		w.fields(fs)
		return nil
	case n.node && n.kind != nil:
		kf, err := t.kindFields(n)
		if err != nil {
			return err
		}
		fs = append(fs, kf...)
		inField()
		w.line("")
		w.line("[[" + header + "]]")
		w.fields(fs)
		return t.heldText(w, header, n)
	case n.node:
		fs = append(fs, field{"flops_fwd", count(n.d.FlopsFwd), "measured"}, field{"flops_bwd", count(n.d.FlopsBwd), "measured"},
			field{"activation_bytes", count(n.d.ActivationBytes), "measured"})
		inField()
		w.line("")
		w.line("[[" + header + "]]")
		w.fields(fs)
		return t.paramOnly(w, header, n)
	}
	// A container.
	if b, ok := t.blockOf[t.signature(n)]; ok && t.isLayer(n) {
		fs = append(fs, field{"block", b, ""})
		inField()
		if t.checkpointEach() {
			fs = append(fs, field{"checkpoint", true, "the layers are not one repeated block: each is a region"})
		}
		w.line("")
		w.line("[[" + header + "]]")
		w.fields(fs)
		return nil
	}
	if reg := t.register(n); reg != nil {
		fs = append(fs, field{"register", reg, ""})
	}
	if t.ownOutput(n) {
		fs = append(fs, field{"output", "own", ownOutputNote})
	}
	inField()
	w.line("")
	w.line("[[" + header + "]]")
	w.fields(fs)
	t.params(w, header+".param", n)
	return t.modulesText(w, header+".module", n.fwd, n)
}

const ownOutputNote = "forward returns a tensor it makes (a residual add), not its last child's"

// ownOutput: a container, not the root (the model file's top level has no
// output key) nor inside a compute module, whose forward returned a
// tensor of its own.
func (t *torchModel) ownOutput(n *tnode) bool {
	return n.d.OwnOutput && n != t.root && !n.node && !n.inside
}

// register is the registration order where it differs from forward's.
func (t *torchModel) register(n *tnode) []string {
	if slices.Equal(n.fwd, n.children) {
		return nil
	}
	out := make([]string, len(n.children))
	for i, c := range n.children {
		out[i] = c.local
	}
	return out
}

func (t *torchModel) params(w *writer, header string, n *tnode) {
	for _, p := range n.d.Params {
		fs := []field{{"name", p.Name, ""}, {"shape", p.Shape, ""}}
		if p.TiedTo != "" {
			fs = append(fs, field{"tied_to", p.TiedTo, "the same Parameter: counted once"})
		} else {
			if p.DType != t.dtype {
				fs = append(fs, field{"dtype", p.DType, ""})
			}
			if !p.RequiresGrad {
				fs = append(fs, field{"requires_grad", false, ""})
			}
		}
		w.line("")
		w.line("[[" + header + "]]")
		w.fields(fs)
	}
}

// heldText writes the children a module of a kind holds beside the
// kind's (T5's relative_attention_bias): as their own kind where they
// have one, else by their parameters.
func (t *torchModel) heldText(w *writer, header string, n *tnode) error {
	for _, c := range n.children {
		if !slices.Contains(n.d.HeldChildren, c.local) {
			continue
		}
		fs := []field{{"name", c.local, ""}}
		if c.kind != nil {
			kf, err := t.kindFields(c)
			if err != nil {
				return err
			}
			w.line("")
			w.line("[[" + header + ".module]]")
			w.fields(append(fs, kf...))
			continue
		}
		w.line("")
		w.line("[[" + header + ".module]]")
		w.fields(fs)
		if err := t.paramOnly(w, header+".module", c); err != nil {
			return err
		}
	}
	return nil
}

// paramOnly writes a measured module's parameters and the children that
// hold the rest, in registration order.
func (t *torchModel) paramOnly(w *writer, header string, n *tnode) error {
	t.params(w, header+".param", n)
	for _, c := range n.children {
		w.line("")
		w.line("[[" + header + ".module]]")
		w.fields([]field{{"name", c.local, ""}})
		if err := t.paramOnly(w, header+".module", c); err != nil {
			return err
		}
	}
	return nil
}

// signature is the text a module's body would have as a block, with its
// own inputs: two modules with the same signature are the same block.
func (t *torchModel) signature(n *tnode) string {
	if n.node || n.d.AliasOf != "" {
		return ""
	}
	w := &writer{}
	in, has := t.inputs(n)
	w.line(fmt.Sprintf("%v %v %s %v", in, has, n.d.Type, t.ownOutput(n)))
	if reg := t.register(n); reg != nil {
		w.fields([]field{{"register", reg, ""}})
	}
	if t.ownOutput(n) {
		w.fields([]field{{"output", "own", ownOutputNote}})
	}
	t.params(w, "B.param", n)
	if err := t.modulesText(w, "B.module", n.fwd, n); err != nil {
		return ""
	}
	return w.b.String()
}

// isLayer: n is a child of a layer list (an nn.ModuleList of blocks).
func (t *torchModel) isLayer(n *tnode) bool {
	return n.parent != nil && slices.Contains(t.layerLists, n.parent)
}

func (t *torchModel) checkpointEach() bool { return t.opt.Checkpointing == "full" }

// findLayers finds the outermost lists of blocks (children named 0 … N-1,
// each a container), folds those whose blocks are identical into a
// repeat, and gives the others' children shared block bodies.
func (t *torchModel) findLayers() {
	t.layerLists = nil
	t.folded = map[*tnode][]string{}
	t.blockOf = map[string]string{}
	t.blockText = map[string]string{}
	t.blockOrder = nil
	t.blockNames = map[string]bool{}
	var walk func(n *tnode)
	walk = func(n *tnode) {
		if n.node {
			return
		}
		if isLayerList(n) {
			t.layerLists = append(t.layerLists, n)
			return
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(t.root)
	for _, l := range t.layerLists {
		sigs := make([]string, len(l.children))
		for i, c := range l.children {
			sigs[i] = t.signature(c)
		}
		// Layers that cycle through a few bodies (sliding and full
		// attention in turn, dense and MoE layers) fold too, as a repeat
		// whose blocks cycle: the whole list is one pattern of checkpoint
		// regions, as import hf writes it.
		p := period(sigs)
		fold := len(p) < len(sigs) || len(sigs) == 1
		fold = fold && !slices.Contains(p, "") && len(l.d.Params) == 0 && slices.Equal(l.fwd, l.children)
		if fold {
			t.folded[l] = p
			for i, s := range p {
				t.addBlock(l.children[i], s)
			}
			continue
		}
		for i, c := range l.children {
			if sigs[i] != "" {
				t.addBlock(c, sigs[i])
			}
		}
	}
}

func isLayerList(n *tnode) bool {
	if len(n.children) == 0 || len(n.d.Params) > 0 {
		return false
	}
	for i, c := range n.children {
		if c.local != strconv.Itoa(i) || c.node || c.d.AliasOf != "" {
			return false
		}
	}
	return true
}

var blockNameBad = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

func (t *torchModel) addBlock(n *tnode, sig string) {
	if _, ok := t.blockOf[sig]; ok {
		return
	}
	base := blockNameBad.ReplaceAllString(n.d.Type, "_")
	if base == "" {
		base = "block"
	}
	base += maskSuffix(n)
	name := base
	for i := 2; t.blockNames[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	t.blockNames[name] = true
	t.blockOf[sig] = name
	t.blockOrder = append(t.blockOrder, sig)
	w := &writer{}
	w.line("")
	w.line("[block." + name + "]")
	if reg := t.register(n); reg != nil {
		w.fields([]field{{"register", reg, ""}})
	}
	if t.ownOutput(n) {
		w.fields([]field{{"output", "own", ownOutputNote}})
	}
	t.params(w, "block."+name+".param", n)
	_ = t.modulesText(w, "block."+name+".module", n.fwd, n)
	t.blockText[sig] = w.b.String()
}

// maskSuffix names a block by its attention's mask, as import hf names
// its blocks: "_sliding" for a sliding window, "_chunked" for chunked
// attention, "" for neither.
func maskSuffix(n *tnode) string {
	if n.kind != nil {
		switch {
		case n.kind["window"] != nil:
			return "_sliding"
		case n.kind["chunk"] != nil:
			return "_chunked"
		}
		return ""
	}
	for _, c := range n.children {
		if s := maskSuffix(c); s != "" {
			return s
		}
	}
	return ""
}
