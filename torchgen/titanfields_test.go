package torchgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/fsdpc/fsdpc/schedule"
)

// titanField is one torchtitan configuration field as
// testdata/torchtitan-fields.txt records it from torchtitan's source at
// the pinned commits: its type, and a Literal's values.
type titanField struct {
	typ    string
	values []string // a Literal's; nil for another type
}

func titanFields(t *testing.T) (fields map[string]titanField, imports map[string]bool) {
	t.Helper()
	f, err := os.Open("testdata/torchtitan-fields.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fields, imports = map[string]titanField{}, map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		form, rest, _ := strings.Cut(line, " ")
		name, typ, _ := strings.Cut(rest, " ")
		if form == "import" {
			imports[name+" "+typ] = true
			continue
		}
		tf := titanField{typ: typ}
		if lit, ok := strings.CutPrefix(typ, "Literal["); ok {
			for _, v := range strings.Split(strings.TrimSuffix(lit, "]"), ", ") {
				tf.values = append(tf.values, strings.Trim(v, "'"))
			}
		}
		fields[form+" "+name] = tf
	}
	return fields, imports
}

// checkTitanValue checks one value against the field's recorded type.
func checkTitanValue(field titanField, v any) error {
	switch {
	case field.values != nil:
		s, ok := v.(string)
		for _, want := range field.values {
			if ok && s == want {
				return nil
			}
		}
		return fmt.Errorf("%v is not one of %v", v, field.values)
	case field.typ == "int":
		switch v.(type) {
		case int64, float64:
			return nil
		}
	case field.typ == "bool":
		if _, ok := v.(bool); ok {
			return nil
		}
	case field.typ == "str":
		if _, ok := v.(string); ok {
			return nil
		}
	default:
		return nil
	}
	return fmt.Errorf("%v (%T) is not %s", v, v, field.typ)
}

func titanPlans(t *testing.T) map[string]*schedule.Plan {
	out := map[string]*schedule.Plan{}
	for _, name := range []string{"llama3-8b", "llama3-70b", "llama3.1-405b", "gpt2-124m", "mixtral-8x7b"} {
		out[name] = zooFullPlan(t, name)
	}
	return out
}

// TestTorchtitanTOMLFields: every key the TOML fragment sets is a field of
// torchtitan's job config at TorchtitanRelease, with a value of its type.
func TestTorchtitanTOMLFields(t *testing.T) {
	fields, _ := titanFields(t)
	for name, p := range titanPlans(t) {
		var doc map[string]map[string]any
		text := Torchtitan(p, "plan\nnot = \"a key\".bin")
		if _, err := toml.Decode(text, &doc); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, text)
		}
		n := 0
		for sec, kv := range doc {
			for k, v := range kv {
				f, ok := fields["toml "+sec+"."+k]
				if !ok {
					t.Errorf("%s: [%s] %s is no field of torchtitan %s's job config", name, sec, k, TorchtitanRelease)
					continue
				}
				if err := checkTitanValue(f, v); err != nil {
					t.Errorf("%s: [%s] %s: %v", name, sec, k, err)
				}
				n++
			}
		}
		if n < 8 {
			t.Errorf("%s: only %d options written", name, n)
		}
	}
}

const titanReader = `import ast, json, sys
src = sys.stdin.read()
compile(src, "config.py", "exec")
out = {"imports": [], "sets": [], "defs": []}
for node in ast.walk(ast.parse(src)):
    if isinstance(node, ast.ImportFrom):
        out["imports"] += [node.module + " " + a.name for a in node.names]
    elif isinstance(node, ast.Assign):
        t = node.targets[0]
        if isinstance(t, ast.Attribute):
            path = ast.unparse(t)
            value = ast.literal_eval(node.value) if not isinstance(node.value, ast.Call) else ast.unparse(node.value)
            out["sets"].append([path, value])
    elif isinstance(node, ast.FunctionDef):
        out["defs"].append(node.name)
json.dump(out, sys.stdout)
`

// TestTorchtitanRegistryFields: the registry entry compiles, imports only
// names torchtitan defines at TorchtitanCommit, and sets only fields of
// its Trainer.Config there, with values of their types.
func TestTorchtitanRegistryFields(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	fields, imports := titanFields(t)
	for name, p := range titanPlans(t) {
		text := TorchtitanRegistry(p, "plan\"\"\"\nimport os\n.bin")
		cmd := exec.Command(py, "-c", titanReader)
		cmd.Stdin = strings.NewReader(text)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s", name, err, stderr.String(), text)
		}
		var got struct {
			Imports []string
			Sets    [][2]any
			Defs    []string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		for _, imp := range got.Imports {
			if !imports[imp] {
				t.Errorf("%s: imports %s, which torchtitan at %s does not define", name, imp, TorchtitanCommit[:12])
			}
		}
		for _, s := range got.Sets {
			path, _ := s[0].(string)
			field := strings.TrimPrefix(path, "config.")
			f, ok := fields["registry "+field]
			if !ok {
				t.Errorf("%s: sets %s, no field of torchtitan's Trainer.Config at %s", name, path, TorchtitanCommit[:12])
				continue
			}
			if err := checkTitanValue(f, s[1]); err != nil {
				t.Errorf("%s: %s: %v", name, path, err)
			}
		}
		if len(got.Sets) < 8 {
			t.Errorf("%s: only %d options set", name, len(got.Sets))
		}
		if _, ok := titanBases[name]; ok && len(got.Defs) != 2 {
			t.Errorf("%s: functions %v, want apply_fsdpc_plan and a registry entry", name, got.Defs)
		}
	}
}
