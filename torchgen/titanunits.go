package torchgen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fsdpc/fsdpc/schedule"
)

// TitanUnit is one fully_shard call of torchtitan's own FSDP application
// (apply_fsdp in torchtitan/models/llama3/infra/parallelize.py at
// TorchtitanRelease, apply_fsdp_to_decoder in
// torchtitan/distributed/fsdp.py at TorchtitanCommit; the two group the
// same modules), for a decoder whose top-level modules are tok_embeddings,
// layers.<i>, norm and the output projection (output; lm_head at
// TorchtitanCommit):
//
//   - tok_embeddings alone, reshard_after_forward from the policy;
//   - each transformer block layers.<i> alone, from the policy;
//   - norm and output together (fully_shard([norm, output])), resharded
//     only under "always": FSDP2 would prefetch them right after forward;
//   - with tied embeddings (TorchtitanCommit), tok_embeddings, norm and
//     the output one unit instead, also resharded only under "always";
//   - the root, holding what is left (nothing, for these decoders).
//
// The policy is fsdp_reshard_after_forward: "always" true, "never" false,
// "default" true without pipeline parallelism (fsdpc plans none).
type TitanUnit struct {
	Name    string   // the unit's label: its modules joined by "+", or "(root)"
	Modules []string // top-level module names
	Params  []string // parameter FQNs, in the plan's order
	Root    bool
	// Reshard is reshard_after_forward under Policy; the root's is
	// FSDP2's: not resharded after forward.
	Reshard bool
}

// TorchtitanUnits applies torchtitan's grouping to the parameters of plan
// p under policy ("default", "always" or "never"). A plan whose model is
// not such a decoder is an error naming what is missing.
func TorchtitanUnits(p *schedule.Plan, policy string) ([]TitanUnit, error) {
	blockReshard := true
	switch policy {
	case "default", "always":
	case "never":
		blockReshard = false
	default:
		return nil, fmt.Errorf("fsdp_reshard_after_forward %q: torchtitan has default, always and never", policy)
	}
	var params []string
	for _, g := range p.Groups {
		for _, gp := range g.Params {
			params = append(params, gp.Name)
			params = append(params, gp.Aliases...)
		}
	}
	top := func(fqn string) (string, string) {
		first, rest, _ := strings.Cut(fqn, ".")
		if first == "layers" {
			i, _, _ := strings.Cut(rest, ".")
			return "layers." + i, first
		}
		return first, first
	}
	have := map[string]bool{}
	for _, fqn := range params {
		_, first := top(fqn)
		have[first] = true
	}
	head := "output"
	if have["lm_head"] {
		head = "lm_head"
	}
	var missing []string
	for _, m := range []string{"tok_embeddings", "layers", "norm", head} {
		if !have[m] {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the model is not a torchtitan decoder: it has no %s", strings.Join(missing, ", "))
	}
	tied := tiedHead(p, head)
	always := policy == "always"
	var units []TitanUnit
	index := map[string]int{}
	add := func(key string, u TitanUnit) {
		index[key] = len(units)
		units = append(units, u)
	}
	if tied {
		add("ends", TitanUnit{Modules: []string{"tok_embeddings", "norm", head}, Reshard: always})
	} else {
		add("tok_embeddings", TitanUnit{Modules: []string{"tok_embeddings"}, Reshard: blockReshard})
		add("ends", TitanUnit{Modules: []string{"norm", head}, Reshard: always})
	}
	for _, fqn := range params {
		key, first := top(fqn)
		if first == "layers" {
			if _, ok := index[key]; !ok {
				add(key, TitanUnit{Modules: []string{key}, Reshard: blockReshard})
			}
			continue
		}
	}
	root := len(units)
	units = append(units, TitanUnit{Name: "(root)", Root: true})
	for _, fqn := range params {
		key, first := top(fqn)
		switch {
		case first == "layers":
		case first == "norm" || first == head || first == "tok_embeddings" && tied:
			key = "ends"
		case first != "tok_embeddings":
			key = ""
		}
		i, ok := index[key]
		if !ok {
			i = root
		}
		units[i].Params = append(units[i].Params, fqn)
	}
	for i := range units {
		if !units[i].Root {
			units[i].Name = strings.Join(units[i].Modules, "+")
		}
	}
	return units, nil
}

// tiedHead reports whether the output projection's weight is the
// embedding's (one parameter under two names).
func tiedHead(p *schedule.Plan, head string) bool {
	for _, g := range p.Groups {
		for _, gp := range g.Params {
			names := append([]string{gp.Name}, gp.Aliases...)
			if slices.Contains(names, head+".weight") && slices.Contains(names, "tok_embeddings.weight") {
				return true
			}
		}
	}
	return false
}

// CompareTorchtitanUnits compares torchtitan's units under policy with
// the plan's groups, as sets of parameters with the root flag and
// reshard_after_forward, and returns each difference as a line: empty
// when torchtitan's own FSDP application builds the plan's units.
func CompareTorchtitanUnits(p *schedule.Plan, policy string) ([]string, error) {
	titan, err := TorchtitanUnits(p, policy)
	if err != nil {
		return nil, err
	}
	key := func(params []string) string {
		s := slices.Clone(params)
		slices.Sort(s)
		return strings.Join(s, "\x00")
	}
	planBy := map[string]schedule.Group{}
	for _, g := range p.Groups {
		var names []string
		for _, gp := range g.Params {
			names = append(names, gp.Name)
			names = append(names, gp.Aliases...)
		}
		planBy[key(names)] = g
	}
	var diffs []string
	matched := map[string]bool{}
	for _, u := range titan {
		k := key(u.Params)
		g, ok := planBy[k]
		if !ok {
			if len(u.Params) == 0 && u.Root {
				continue // an empty root: FSDP2 makes no parameter group
			}
			diffs = append(diffs, fmt.Sprintf("torchtitan's unit %s (%s) is no unit of the plan", u.Name, paramList(u.Params)))
			continue
		}
		matched[k] = true
		planReshard := g.Policy.Reshard == schedule.ReshardTrue
		if g.Root {
			planReshard = false
		}
		if g.Root != u.Root {
			diffs = append(diffs, fmt.Sprintf("unit %s is the root in %s only", u.Name, map[bool]string{true: "torchtitan", false: "the plan"}[u.Root]))
		}
		if g.Policy.Reshard == schedule.ReshardTo {
			diffs = append(diffs, fmt.Sprintf("unit %s: the plan reshards to %d ranks after forward, which torchtitan cannot", u.Name, g.Policy.ReshardTo))
		} else if planReshard != (u.Reshard && !u.Root) {
			diffs = append(diffs, fmt.Sprintf("unit %s: reshard_after_forward %t in the plan, %t in torchtitan", u.Name, planReshard, u.Reshard && !u.Root))
		}
	}
	for _, g := range p.Groups {
		var names []string
		for _, gp := range g.Params {
			names = append(names, gp.Name)
			names = append(names, gp.Aliases...)
		}
		if !matched[key(names)] && len(names) > 0 {
			diffs = append(diffs, fmt.Sprintf("the plan's unit %s (%s) is no unit of torchtitan", g.Label(), paramList(names)))
		}
	}
	return diffs, nil
}

func paramList(params []string) string {
	if len(params) <= 4 {
		return strings.Join(params, ", ")
	}
	return fmt.Sprintf("%s, … %d parameters", strings.Join(params[:3], ", "), len(params))
}
