// Package hf imports Hugging Face transformers models: it reads a model's
// config.json and writes the equivalent fsdpc model file, with modules and
// parameters named, shaped and ordered as transformers 5 builds the model
// (what FSDP2 shards), so that plans match the model tensor by tensor.
package hf

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/ir"
)

// Options override the training setup written into [train] and [cluster].
// Zero values take the defaults.
type Options struct {
	// SeqLen defaults to min(max_position_embeddings, DefaultMaxSeqLen).
	SeqLen int64
	// GPU is a preset name; it defaults to DefaultGPU.
	GPU string
	// WorldSize defaults to DefaultWorldSize, one node.
	WorldSize int
	// GPUsPerNode defaults to DefaultGPUsPerNode.
	GPUsPerNode int
	// MicroBatch defaults to 1.
	MicroBatch int
	// Checkpointing is a [train] checkpointing mode; it defaults to "full".
	Checkpointing string
}

const (
	DefaultMaxSeqLen = 8192
	DefaultGPU       = "h100-sxm"
	DefaultWorldSize = 8
	// DefaultGPUsPerNode is an HGX/DGX node's.
	DefaultGPUsPerNode   = 8
	DefaultCheckpointing = "full"
	maxMicroBatch        = 1 << 20
	// Bounds that keep a mistyped flag from producing a file ir rejects.
	maxSeqLen    = 1 << 30
	maxWorldSize = 1 << 24
)

// Supported lists the model_type values Convert understands.
func Supported() []string {
	out := make([]string, 0, len(families))
	for k := range families {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Convert turns a config.json into the text of an fsdpc model file with
// the default training setup. file names the config in messages.
func Convert(file string, configJSON []byte) ([]byte, error) {
	return ConvertWith(file, configJSON, Options{})
}

// ConvertWith is Convert with the training setup overridden.
func ConvertWith(file string, configJSON []byte, opt Options) ([]byte, error) {
	if err := opt.fill(); err != nil {
		return nil, err
	}
	c, err := parseConfig(file, configJSON)
	if err != nil {
		return nil, err
	}
	typ, ok := c.optString("model_type")
	if !ok {
		if err := c.err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: model_type is missing; it is required (supported: %s)", file, strings.Join(Supported(), ", "))
	}
	fam, ok := families[typ]
	if why, refusedType := refused[typ]; refusedType {
		return nil, fmt.Errorf("%s: %s (supported: %s)", file, why, strings.Join(Supported(), ", "))
	}
	if !ok {
		return nil, fmt.Errorf("%s: model_type %q is not supported (supported: %s)", file, clean(typ), strings.Join(Supported(), ", "))
	}
	m := &model{modelType: typ, family: fam}
	fam.read(c, m)
	vetKeys(c, m)
	if err := c.err(); err != nil {
		return nil, err
	}
	m.source = describeSource(file, c, configJSON)
	m.name = modelName(file, c)
	if err := m.setTraining(opt); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	out := m.emit()
	// The importer must never hand over a file fsdpc cannot read: loading it
	// here turns a gap between importer and ir into an error, not a surprise
	// for the user later.
	if _, err := ir.Load(m.name+".toml", out); err != nil {
		if ir.ExceedsLimits(err) {
			// Sizes the config may hold but fsdpc cannot plan: the
			// config's doing, said in the model's terms.
			return nil, fmt.Errorf("%s: the model is beyond fsdpc's limits (docs/model-format.md, Limits); its largest sizes are %s:\n%v", file, c.largestSizes(), err)
		}
		return nil, fmt.Errorf("%s: internal error: the imported model does not load (please report):\n%v", file, err)
	}
	return out, nil
}

// Validate reports an option no model file can hold. Zero values are
// valid: they mean the default.
func (o Options) Validate() error {
	if o.SeqLen < 0 || o.SeqLen > maxSeqLen {
		return fmt.Errorf("seq-len %d is out of range (1 to %d)", o.SeqLen, maxSeqLen)
	}
	if o.GPU != "" && !slices.Contains(hardware.PresetNames(), o.GPU) {
		return fmt.Errorf("unknown GPU preset %q (presets: %s)", o.GPU, strings.Join(hardware.PresetNames(), ", "))
	}
	if o.WorldSize < 0 || o.WorldSize > maxWorldSize {
		return fmt.Errorf("world-size %d is out of range (1 to %d)", o.WorldSize, maxWorldSize)
	}
	if o.GPUsPerNode < 0 || o.GPUsPerNode > maxWorldSize {
		return fmt.Errorf("gpus-per-node %d is out of range (1 to %d)", o.GPUsPerNode, maxWorldSize)
	}
	world := o.WorldSize
	if world == 0 {
		world = DefaultWorldSize
	}
	if o.GPUsPerNode > 0 && world%o.GPUsPerNode != 0 && world > o.GPUsPerNode {
		return fmt.Errorf("world-size %d is not a whole number of nodes of %d GPUs", world, o.GPUsPerNode)
	}
	if o.MicroBatch < 0 || o.MicroBatch > maxMicroBatch {
		return fmt.Errorf("micro-batch %d is out of range (1 to %d)", o.MicroBatch, maxMicroBatch)
	}
	if o.Checkpointing != "" {
		if _, ok := ir.CheckpointingModes[o.Checkpointing]; !ok {
			return fmt.Errorf("unknown checkpointing mode %q (modes: %s)", o.Checkpointing, strings.Join(slices.Sorted(maps.Keys(ir.CheckpointingModes)), ", "))
		}
	}
	return nil
}

func (o *Options) fill() error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.GPU == "" {
		o.GPU = DefaultGPU
	}
	if o.WorldSize == 0 {
		o.WorldSize = DefaultWorldSize
	}
	if o.GPUsPerNode == 0 {
		o.GPUsPerNode = DefaultGPUsPerNode
	}
	if o.MicroBatch == 0 {
		o.MicroBatch = 1
	}
	if o.Checkpointing == "" {
		o.Checkpointing = DefaultCheckpointing
	}
	return nil
}

// source says where a model came from, for the header.
type source struct {
	file, arch, nameOrPath, sha, torchDType string
}

func describeSource(file string, c *config, src []byte) source {
	sum := sha256.Sum256(src)
	s := source{file: filepath.Base(file), sha: hex.EncodeToString(sum[:])[:16]}
	if a := c.stringList("architectures"); len(a) > 0 {
		s.arch = strings.Join(a, ", ")
	}
	if v, ok := c.fields["_name_or_path"]; ok {
		var p string
		if jsonString(v, &p) {
			s.nameOrPath = p
		}
	}
	if v, ok := c.fields["torch_dtype"]; ok {
		var p string
		if jsonString(v, &p) {
			s.torchDType = p
		}
	}
	return s
}

// modelName prefers the Hub id the config was saved from, then the file's
// own name when it says more than "config".
func modelName(file string, c *config) string {
	if v, ok := c.fields["_name_or_path"]; ok {
		var p string
		if jsonString(v, &p) {
			p = strings.TrimRight(p, "/")
			if n := clean(p[strings.LastIndexByte(p, '/')+1:]); n != "" {
				return n
			}
		}
	}
	// Llama-3.1-8B.config.json names Llama-3.1-8B.
	base := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	base = strings.TrimSuffix(base, ".config")
	if base != "" && base != "config" && base != "." && base != "/" {
		return clean(base)
	}
	return "imported"
}
