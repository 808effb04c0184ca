package ir

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestTOML10 holds the reader to TOML 1.0 where the TOML parser is more
// lenient: each document below parses with BurntSushi/toml v1.6.0, and
// each is one of the kinds toml-test's invalid cases (files-toml-1.0.0)
// cover that the parser accepts (the case named). Run against all 499
// invalid and 210 valid cases of toml-test d168c2a, the parser accepts 25
// invalid ones and checkTOML10 refuses all 25, and none of the valid.
func TestTOML10(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"issue 28 H3", "profile.clock_ratio = 0.05\n[profile]\ngpus = [\"h100-sxm\"]\n", "[profile] defines profile again: it is already a table dotted keys on line 1 defined"},
		{"table/append-with-dotted-keys-01", "[a.b.c]\nz = 9\n[a]\nb.c.t = 1\n", "dotted keys cannot add to b.c, which is a table its [header] on line 1 defined"},
		{"table/append-with-dotted-keys-03", "[[a.b]]\n[a]\nb.y = 2\n", "which is an array of tables"},
		{"table/append-with-dotted-keys-05", "a.b.c = 1\na.b = 2\n", "a.b is defined twice"},
		{"table/duplicate-key-04", "[fruit]\napple.color = \"red\"\n[fruit.apple]\n", "[fruit.apple] defines fruit.apple again"},
		{"table/redefine-03", "[t1]\nt2.t3.v = 0\n[t1.t2.t3]\n", "[t1.t2.t3] defines t1.t2.t3 again"},
		{"inline-table/overwrite-02", "a = {}\n[a.b]\n", "a is an inline table"},
		{"inline-table/overwrite-08", "tab = { inner = { dog = \"best\" }, inner.cat = \"worst\" }\n", "dotted keys cannot add to inner, which is an inline table"},
		{"array/extend-defined-aot", "[[tab.arr]]\n[tab]\narr.val1 = 1\n", "which is an array of tables"},
		{"inline-table/linebreak-01", "t = {a = 1,\nb = 2}\n", "an inline table spans lines"},
		{"inline-table/trailing-comma", "t = {a = 1, }\n", "ends with a comma"},
		{"string/basic-byte-escapes", "s = \"\\x41\"\n", "the escape \"\\\\x41\""},
		{"datetime/no-secs", "d = 1979-05-27T07:32Z\n", "has no seconds"},
		{"datetime/offset-overflow-minute", "d = 1985-06-18 17:04:07+12:60\n", "more than 59 minutes"},
	} {
		var v map[string]any
		if _, err := toml.Decode(tc.doc, &v); err != nil {
			t.Errorf("%s: the parser refuses it (%v): the case tests nothing here", tc.name, err)
			continue
		}
		_, msg := checkTOML10(tc.doc)
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: checkTOML10 = %q, want %q", tc.name, msg, tc.want)
		}
	}
	for _, ok := range []string{
		"[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n[fruit.apple.texture]\nsmooth = true\n", // the spec's example
		"[a.b.c]\n[a]\nd = 1\n[a.b.e]\n",
		"[[a]]\nb.c = 1\n[[a]]\nb.c = 2\n[a.d]\n",
		"t = {a.b = 1, a.c = [1,\n 2]}\ns = \"\\u00e9\\t\\\\ \"\"\"\nx = \\\n y\"\"\"\n",
		"d = 1979-05-27 07:32:00.5-07:00\nt = 07:32:00\n",
	} {
		if _, msg := checkTOML10(ok); msg != "" {
			t.Errorf("%q: %s", ok, msg)
		}
	}
}

// TestProfileInjection: the profile H3 forged (a constant on a comment's
// second line, then the [profile] header) is refused, naming the file
// and the line, and no plan is made with it.
func TestProfileInjection(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../plans/gpt2-124m.toml")
	if err != nil {
		t.Fatal(err)
	}
	prof := "# fsdpc hardware profile, fitted to runs of x\nprofile.clock_ratio = 0.05\n#.log\n[profile]\ngpus = [\"a100-80gb\"]\nmax_efficiency = 0.8\n"
	os.WriteFile(filepath.Join(dir, "p.profile.toml"), []byte(prof), 0o644)
	model := filepath.Join(dir, "m.toml")
	os.WriteFile(model, []byte(strings.Replace(string(src), "[cluster]\n", "[cluster]\nprofile = \"p.profile.toml\"\n", 1)), 0o644)
	_, err = LoadFile(model)
	if err == nil || !strings.Contains(err.Error(), "line 4, column 1: TOML 1.0: [profile] defines profile again") {
		t.Errorf("LoadFile = %v, want the profile refused at its line 4", err)
	}
}

// FuzzProfile: any profile file a model names gives a model whose profile
// holds finite constants, sorted, or an error naming the
// profile's file; never a panic. A profile the TOML 1.0 check refuses is
// never used. Seeds: what calibrate -o writes, and H3's forgery.
//
//	go test -run '^$' -fuzz FuzzProfile -fuzztime 2m ./ir
func FuzzProfile(f *testing.F) {
	f.Add("# fsdpc hardware profile\n[profile]\ngpus = [\"a100-80gb\"]\nmax_efficiency = 0.8\noverlap = 0.5\nclock_ratio = 0.9\n")
	f.Add("# x\nprofile.clock_ratio = 0.05\n#\n[profile]\ngpus = [\"a100-80gb\"]\nmax_efficiency = 0.8\n")
	f.Add("[profile]\ngpus = [\"a100-80gb\"]\nattention_forward = 1e-300\nnic_efficiency = inf\n")
	src, err := os.ReadFile("../plans/gpt2-124m.toml")
	if err != nil {
		f.Fatal(err)
	}
	model := strings.Replace(string(src), "[cluster]\n", "[cluster]\nprofile = \"p.profile.toml\"\n", 1)
	f.Fuzz(func(t *testing.T, prof string) {
		dir := t.TempDir()
		path := filepath.Join(dir, "p.profile.toml")
		if err := os.WriteFile(path, []byte(prof), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Load(filepath.Join(dir, "m.toml"), []byte(model))
		if err != nil {
			if !strings.Contains(err.Error(), path) && !strings.Contains(err.Error(), "m.toml") {
				t.Fatalf("error %q names neither file", err)
			}
			return
		}
		if _, msg := checkTOML10(prof); msg != "" {
			t.Fatalf("a profile TOML 1.0 refuses (%s) was used", msg)
		}
		for i, v := range m.Cluster.Profile {
			if i > 0 && m.Cluster.Profile[i-1].Name >= v.Name || math.IsNaN(v.Value) || math.IsInf(v.Value, 0) {
				t.Fatalf("profile %v", m.Cluster.Profile)
			}
		}
	})
}
