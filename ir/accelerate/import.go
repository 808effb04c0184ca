package accelerate

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/ir/hf"
)

// Input is an accelerate config and the model it trains: a Hugging Face
// config.json (imported as `fsdpc import hf` does, with the config's
// world) or a model file's text.
type Input struct {
	ConfigFile string
	Config     []byte
	// ModelArg is how the user named the model, for the header.
	ModelArg string

	HFFile    string
	HF        []byte
	HFOptions hf.Options

	ModelFile string
	ModelText []byte

	// Torch is the description `python -m fsdpc.importer` wrote of a
	// PyTorch factory's model, converted with TorchOptions and the
	// config's world.
	Torch        *hf.TorchDescription
	TorchOptions hf.Options
}

// Import writes the model file whose policy is what accelerate does with
// the model under the config, and returns it with notes for the
// terminal: the FSDP1 → FSDP2 mapping, keys accelerate ignores.
func Import(in Input) ([]byte, []string, error) {
	c, err := Parse(in.ConfigFile, in.Config)
	if err != nil {
		return nil, nil, err
	}
	base, file, modelType := in.ModelText, in.ModelFile, ""
	if in.HF != nil {
		if modelType, err = ModelType(in.HFFile, in.HF); err != nil {
			return nil, nil, err
		}
		opt := in.HFOptions
		opt.WorldSize, opt.GPUsPerNode, opt.Checkpointing = c.NumProcesses, c.NumProcesses/c.NumMachines, "none"
		if err := opt.Validate(); err != nil {
			return nil, nil, err
		}
		if base, err = hf.ConvertWith(in.HFFile, in.HF, opt); err != nil {
			return nil, nil, err
		}
		base = withoutHeader(base)
		file = strings.TrimSuffix(in.HFFile, ".json") + ".toml"
	}
	if in.Torch != nil {
		opt := in.TorchOptions
		opt.WorldSize, opt.GPUsPerNode, opt.Checkpointing = c.NumProcesses, c.NumProcesses/c.NumMachines, "none"
		if err := opt.Validate(); err != nil {
			return nil, nil, err
		}
		res, err := hf.ConvertTorch(in.Torch, opt)
		if err != nil {
			return nil, nil, err
		}
		base, file = withoutHeader(res.Text), "factory.toml"
	}
	m, err := ir.Load(file, base)
	if err != nil {
		return nil, nil, err
	}
	var mm *Model
	if in.Torch != nil {
		if mm, err = FromTorch(m, in.Torch); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", in.ModelArg, err)
		}
	} else if modelType != "" {
		if mm, err = FromTransformers(m, modelType); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", in.HFFile, err)
		}
	} else {
		mm = FromModelFile(m)
	}
	d, err := Decide(c, mm)
	if err != nil {
		return nil, nil, err
	}
	text, err := Write(base, c, mm, d, Source{ConfigSrc: in.Config, Model: in.ModelArg})
	if err != nil {
		return nil, nil, err
	}
	written, err := ir.Load(file, text)
	if err != nil {
		return nil, nil, fmt.Errorf("the model file with accelerate's policy does not load: %w", err)
	}
	if err := Check(written, d, m); err != nil {
		return nil, nil, err
	}
	var notes []string
	for _, n := range c.Notes {
		notes = append(notes, c.File+":"+n.String())
	}
	return text, append(notes, d.Notes...), nil
}

// withoutHeader drops import hf's leading comment, whose assumptions
// (fp32 gradient reduction, the policy a starting point) the accelerate
// header replaces.
func withoutHeader(text []byte) []byte {
	lines := strings.SplitAfter(string(text), "\n")
	i := 0
	for i < len(lines) && (strings.HasPrefix(lines[i], "#") || strings.TrimSpace(lines[i]) == "") {
		i++
	}
	return []byte(strings.Join(lines[i:], ""))
}

// ModelType is a config.json's model_type.
func ModelType(name string, src []byte) (string, error) {
	var head struct {
		ModelType string `json:"model_type"`
	}
	if err := json.Unmarshal(src, &head); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if head.ModelType == "" {
		return "", fmt.Errorf("%s: no model_type", name)
	}
	return head.ModelType, nil
}
