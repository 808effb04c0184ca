package accelerate

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

// TestTransformersTable runs record_classes.py in the torch root over every
// ir/hf fixture (transformers 5.12 and accelerate 1.14 on the meta
// device) and compares what it records with the embedded
// transformers.json, so the classes fsdpc decides with are the
// libraries'. It needs the torch root and root privileges (chroot);
// FSDPC_TORCH_CONFORMANCE=1 turns it on.
func TestTransformersTable(t *testing.T) {
	if testing.Short() || os.Getenv("FSDPC_TORCH_CONFORMANCE") != "1" {
		t.Skip("builds the models with transformers: set FSDPC_TORCH_CONFORMANCE=1")
	}
	root := os.Getenv("FSDPC_TORCH_ROOT")
	if root == "" {
		root = "/var/cache/fsdpc/torch-forky"
	}
	if _, err := os.Stat(filepath.Join(root, ".fsdpc-torch-ready")); err != nil {
		t.Fatalf("no torch root at %s: %v", root, err)
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "fsdpc-accelerate-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	inside := "/tmp/" + filepath.Base(dir)
	script, err := os.ReadFile("record_classes.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "record_classes.py"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	fixtures, err := filepath.Glob("../hf/testdata/*.json")
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	args := []string{root, "python3", inside + "/record_classes.py", inside + "/out.json"}
	for _, f := range fixtures {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), src, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, inside+"/"+filepath.Base(f))
	}
	cmd := exec.Command("chroot", args...)
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record_classes.py: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want table
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(transformersJSON, &want); err != nil {
		t.Fatal(err)
	}
	if got.Transformers != want.Transformers || got.Accelerate != want.Accelerate {
		t.Errorf("the root has transformers %s and accelerate %s; transformers.json was recorded from %s and %s", got.Transformers, got.Accelerate, want.Transformers, want.Accelerate)
	}
	for mt, w := range want.Families {
		if g, ok := got.Families[mt]; !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: transformers.json says %+v, the libraries %+v", mt, w, g)
		}
	}
	for mt := range got.Families {
		if _, ok := want.Families[mt]; !ok {
			t.Errorf("%s: a fixture's model type transformers.json lacks", mt)
		}
	}
}
