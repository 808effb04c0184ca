// Package accelerate reads a Hugging Face accelerate config (the YAML
// `accelerate config` writes and `accelerate launch --config_file` reads)
// and decides what accelerate 1.14's FSDP2 path does with a model under
// it: which modules it calls fully_shard on, with which
// reshard_after_forward, MixedPrecisionPolicy and offload, which modules
// it wraps for activation checkpointing, on how many processes. An FSDP1
// config is read through accelerate's own FSDP1 → FSDP2 conversion
// (`accelerate to-fsdp2`), and every key it drops or changes is reported
// with its FSDP2 meaning. The semantics follow accelerate 1.14's
// commands/launch.py (the config keys and their defaults),
// utils/launch.py (the environment), utils/dataclasses.py
// (FullyShardedDataParallelPlugin), utils/fsdp_utils.py
// (fsdp2_prepare_model, fsdp2_prepare_auto_wrap_policy, fsdp2_apply_ac)
// and commands/to_fsdp2.py, read, not copied; docs/accelerate.md.
package accelerate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/internal/yamlsubset"
)

// Wrap policies, as fsdp_auto_wrap_policy names them.
const (
	TransformerBasedWrap = "TRANSFORMER_BASED_WRAP"
	SizeBasedWrap        = "SIZE_BASED_WRAP"
	NoWrap               = "NO_WRAP"
)

// Config is what accelerate's FSDP2 plugin holds after reading a config
// through `accelerate launch`: every launcher default applied.
type Config struct {
	File string
	// FromFSDP1 is set when the file is an FSDP1 config (fsdp_version 1
	// or absent), read through to-fsdp2's mapping.
	FromFSDP1 bool
	// Notes say, key by key, what the FSDP1 → FSDP2 mapping did and which
	// keys accelerate ignores, each with its place.
	Notes []Note

	WrapPolicy string
	// LayerClasses is fsdp_transformer_layer_cls_to_wrap split at commas
	// as accelerate splits it (no trimming); nil when unset, so the
	// model's _no_split_modules apply.
	LayerClasses []string
	MinNumParams int64
	// Reshard is fsdp_reshard_after_forward.
	Reshard                 bool
	Offload                 bool
	ActivationCheckpointing bool
	CPURAMEfficientLoading  bool
	// StateDictType is FULL_STATE_DICT or SHARDED_STATE_DICT.
	StateDictType string
	// MixedPrecision is no, fp16 or bf16.
	MixedPrecision string
	NumProcesses   int
	NumMachines    int
	// Compile is dynamo_config's dynamo_backend INDUCTOR: torch.compile.
	Compile bool

	pos map[string]yamlsubset.Node // where each key was written
}

// Note is one remark about a key.
type Note struct {
	Key  string
	Line int
	Col  int
	Msg  string
}

func (n Note) String() string {
	if n.Line == 0 {
		return fmt.Sprintf("%s: %s", n.Key, n.Msg)
	}
	return fmt.Sprintf("%d:%d: %s: %s", n.Line, n.Col, n.Key, n.Msg)
}

// Pos returns where key (an fsdp_config key with its fsdp_ prefix, or a
// top-level key) was written, 0, 0 when it was not.
func (c *Config) Pos(key string) (line, col int) {
	n, ok := c.pos[key]
	if !ok {
		return 0, 0
	}
	return n.Line, n.Col
}

// Errorf is an error naming the file, the key's place and the key.
func (c *Config) Errorf(key, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if line, col := c.Pos(key); line > 0 {
		return fmt.Errorf("%s:%d:%d: %s: %s", c.File, line, col, key, msg)
	}
	return fmt.Errorf("%s: %s: %s", c.File, key, msg)
}

type parseError struct {
	file string
	node *yamlsubset.Node
	key  string
	msg  string
}

func (e *parseError) Error() string {
	if e.node == nil {
		return fmt.Sprintf("%s: %s: %s", e.file, e.key, e.msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s", e.file, e.node.Line, e.node.Col, e.key, e.msg)
}

// Parse reads an accelerate config file.
func Parse(file string, src []byte) (*Config, error) {
	doc, err := yamlsubset.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", file, err)
	}
	if doc == nil {
		return nil, fmt.Errorf("%s: the config is empty (accelerate refuses an empty config)", file)
	}
	if doc.Kind != yamlsubset.Mapping {
		return nil, fmt.Errorf("%s:%d:%d: an accelerate config is a mapping of keys, not a %s", file, doc.Line, doc.Col, kindName(doc))
	}
	c := &Config{File: file, pos: map[string]yamlsubset.Node{}}
	fail := func(n *yamlsubset.Node, key, format string, args ...any) error {
		return &parseError{file: file, node: n, key: key, msg: fmt.Sprintf(format, args...)}
	}
	top := map[string]*yamlsubset.Node{}
	for i, k := range doc.Keys {
		if _, ok := topKeys[k.Text]; !ok {
			return nil, fail(k, k.Text, "not a key of accelerate 1.14's config (ClusterConfig)%s", suggestKey(k.Text, keysOf(topKeys)))
		}
		top[k.Text] = doc.Values[i]
		c.pos[k.Text] = *doc.Values[i]
	}
	if err := c.readTop(top, fail); err != nil {
		return nil, err
	}
	fsdp := map[string]*yamlsubset.Node{}
	var order []string
	if n := top["fsdp_config"]; n != nil && !isNull(n) {
		if n.Kind != yamlsubset.Mapping {
			return nil, fail(n, "fsdp_config", "must be a mapping of fsdp_ keys, not a %s", kindName(n))
		}
		for i, k := range n.Keys {
			// The launcher adds the prefix to a key written without it.
			key := k.Text
			if !strings.HasPrefix(key, "fsdp") {
				key = "fsdp_" + key
			}
			if _, ok := fsdpKeys[key]; !ok {
				return nil, fail(k, key, "not an FSDP key of accelerate 1.14's launcher%s", suggestKey(key, keysOf(fsdpKeys)))
			}
			if _, dup := fsdp[key]; dup {
				return nil, fail(k, key, "given twice (once without its fsdp_ prefix)")
			}
			fsdp[key] = n.Values[i]
			c.pos[key] = *n.Values[i]
			order = append(order, key)
		}
	}
	if err := c.readFSDP(fsdp, order, fail); err != nil {
		return nil, err
	}
	return c, nil
}

func kindName(n *yamlsubset.Node) string {
	return [...]string{"scalar", "mapping", "sequence"}[n.Kind]
}

func isNull(n *yamlsubset.Node) bool { return n.Kind == yamlsubset.Scalar && n.Value() == nil }

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type failFunc func(n *yamlsubset.Node, key, format string, args ...any) error

// readTop reads the top-level keys that change the plan and checks the
// others are what an FSDP launch accepts.
func (c *Config) readTop(top map[string]*yamlsubset.Node, fail failFunc) error {
	env := "LOCAL_MACHINE"
	if n := top["compute_environment"]; n != nil {
		env = scalarText(n)
	}
	if env != "LOCAL_MACHINE" {
		return fail(top["compute_environment"], "compute_environment", "%q: fsdpc reads LOCAL_MACHINE configs (accelerate launch applies a config's keys only there)", env)
	}
	dt := top["distributed_type"]
	if dt == nil {
		return &parseError{file: c.File, key: "distributed_type", msg: "missing: accelerate requires it, and FSDP is what fsdpc plans"}
	}
	if s := scalarText(dt); s != "FSDP" {
		return fail(dt, "distributed_type", "%q: not an FSDP config; fsdpc plans distributed_type: FSDP", s)
	}
	if n := top["use_cpu"]; n != nil && truthy(n) {
		return fail(n, "use_cpu", "true: accelerate 1.14 never enables FSDP on CPU")
	}
	c.MixedPrecision = "no"
	if n := top["mixed_precision"]; n != nil && !isNull(n) {
		s := strings.ToLower(scalarText(n))
		switch s {
		case "no", "fp16", "bf16":
			c.MixedPrecision = s
		case "fp8":
			return fail(n, "mixed_precision", "fp8: fsdpc does not model fp8 training (accelerate's FSDP2 runs it through TransformerEngine or torchao)")
		default:
			return fail(n, "mixed_precision", "%q: accelerate accepts no, fp16, bf16 or fp8", scalarText(n))
		}
	} else if n := top["fp16"]; n != nil && truthy(n) {
		c.MixedPrecision = "fp16" // the old key, converted by process_config
	}
	n := top["num_processes"]
	if n == nil {
		return &parseError{file: c.File, key: "num_processes", msg: "missing: accelerate launch asks for --num_processes with a config that lacks it; give the total number of processes (GPUs)"}
	}
	np, ok := n.Value().(int64)
	if !ok || np < 1 || np > 1<<24 {
		return fail(n, "num_processes", "must be a positive integer, the total number of processes, not %s", scalarText(n))
	}
	c.NumProcesses, c.NumMachines = int(np), 1
	if n := top["num_machines"]; n != nil {
		nm, ok := n.Value().(int64)
		if !ok || nm < 1 || nm > np {
			return fail(n, "num_machines", "must be a positive integer no larger than num_processes, not %s", scalarText(n))
		}
		if np%nm != 0 {
			return fail(n, "num_machines", "%d machines cannot share %d processes evenly (accelerate starts num_processes / num_machines on each)", nm, np)
		}
		c.NumMachines = int(nm)
	}
	if n := top["dynamo_config"]; n != nil && !isNull(n) {
		if n.Kind != yamlsubset.Mapping {
			return fail(n, "dynamo_config", "must be a mapping, not a %s", kindName(n))
		}
		for i, k := range n.Keys {
			v := n.Values[i]
			switch k.Text {
			case "dynamo_backend":
				switch strings.ToUpper(scalarText(v)) {
				case "NO":
				case "INDUCTOR":
					c.Compile = true
				default:
					return fail(v, "dynamo_config.dynamo_backend", "%q: fsdpc models torch.compile with inductor (INDUCTOR) or none (NO)", scalarText(v))
				}
			case "dynamo_mode", "dynamo_use_fullgraph", "dynamo_use_dynamic", "dynamo_use_regional_compilation":
				c.Notes = append(c.Notes, Note{Key: "dynamo_config." + k.Text, Line: v.Line, Col: v.Col, Msg: "read; fsdpc's cost model does not distinguish it"})
			default:
				return fail(k, "dynamo_config."+k.Text, "not a key of accelerate 1.14's dynamo_config")
			}
		}
	} else if n := top["dynamo_backend"]; n != nil {
		switch strings.ToUpper(scalarText(n)) {
		case "NO":
		case "INDUCTOR":
			c.Compile = true
		default:
			return fail(n, "dynamo_backend", "%q: fsdpc models torch.compile with inductor (INDUCTOR) or none (NO)", scalarText(n))
		}
	}
	if n := top["parallelism_config"]; n != nil && !isNull(n) && !(n.Kind == yamlsubset.Mapping && len(n.Keys) == 0) {
		return fail(n, "parallelism_config", "fsdpc does not read accelerate's parallelism_config yet (HSDP, tensor and context parallelism): plan with a [cluster] mesh instead")
	}
	for _, k := range []string{"deepspeed_config", "megatron_lm_config"} {
		if n := top[k]; n != nil && !isNull(n) && !(n.Kind == yamlsubset.Mapping && len(n.Keys) == 0) {
			c.Notes = append(c.Notes, Note{Key: k, Line: n.Line, Col: n.Col, Msg: "ignored: distributed_type is FSDP"})
		}
	}
	return nil
}

// scalarText is a scalar's text as Python's str() would print the
// value PyYAML read (True, False, None, numbers as written).
func scalarText(n *yamlsubset.Node) string {
	if n.Kind != yamlsubset.Scalar {
		return "a " + kindName(n)
	}
	switch v := n.Value().(type) {
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return n.Text
}

// truthy is Python's truth of the value PyYAML read: the launcher tests
// some config values with a plain `if`, so the string "false" is true.
func truthy(n *yamlsubset.Node) bool {
	switch v := n.Value().(type) {
	case nil:
		return false
	case bool:
		return v
	case int64:
		return v != 0
	case float64:
		return v != 0
	case string:
		return v != ""
	}
	return n.Kind != yamlsubset.Scalar && (len(n.Keys) > 0 || len(n.Items) > 0)
}

// strToBool is accelerate's str_to_bool of str(value).lower(), which the
// plugin applies to the environment the launcher sets from each flag.
func strToBool(n *yamlsubset.Node) (bool, bool) {
	if n.Kind != yamlsubset.Scalar {
		return false, false
	}
	switch strings.ToLower(scalarText(n)) {
	case "y", "yes", "t", "true", "on", "1":
		return true, true
	case "n", "no", "f", "false", "off", "0":
		return false, true
	}
	return false, false
}
