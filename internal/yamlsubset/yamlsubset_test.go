package yamlsubset

import (
	"fmt"
	"strings"
	"testing"
)

// dump writes a node as compact text: maps {k=v,...}, lists [..],
// scalars as the Go value they resolve to, with their line:col.
func dump(n *Node) string {
	switch n.Kind {
	case Mapping:
		var parts []string
		for i, k := range n.Keys {
			parts = append(parts, k.Text+"="+dump(n.Values[i]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case Sequence:
		var parts []string
		for _, it := range n.Items {
			parts = append(parts, dump(it))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprintf("%#v@%d:%d", n.Value(), n.Line, n.Col)
}

func TestParse(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"a: 1\n", `{a=1@1:4}`},
		{"a: 1 # c\n# x\nb: 'it''s'\n", `{a=1@1:4,b="it's"@3:4}`},
		{"a:\n  b: true\n  c: no\n", `{a={b=true@2:6,c=false@3:6}}`},
		{"a:\n- x\n- 'y'\n", `{a=["x"@2:3,"y"@3:3]}`},
		{"a:\n  - k: 1\n    l: 2\n", `{a=[{k=1@2:8,l=2@3:8}]}`},
		{"a: []\nb: {}\nc: [x, 'y z', 3]\nd: {e: 1}\n", `{a=[],b={},c=["x"@3:5,"y z"@3:8,3@3:15],d={e=1@4:8}}`},
		{"a: 1e8\nb: 1.0e+8\nc: ~\nd:\ne: 0x10\n", `{a="1e8"@1:4,b=1e+08@2:4,c=<nil>@3:4,d=<nil>@4:3,e="0x10"@5:4}`},
		{"a: \"x\\ty\\u00e9\"\n", `{a="x\ty` + "é" + `"@1:4}`},
		{"---\na: http://x:8\n", `{a="http://x:8"@2:4}`},
		{"a: x#y\n", `{a="x#y"@1:4}`},
	} {
		n, err := Parse([]byte(tc.src))
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if got := dump(n); got != tc.want {
			t.Errorf("%q: got %s, want %s", tc.src, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"a: 1\na: 2\n", "2:1: key a again (first at line 1)"},
		{"a: 1\n  b: 2\n", "2:3: unexpected indentation"},
		{"a: &x 1\n", "1:4: anchors and aliases"},
		{"a: *x\n", "1:4: anchors and aliases"},
		{"a: !!str 1\n", "1:4: tags are not supported"},
		{"a: >\n  x\n", "1:4: block scalars"},
		{"a: [1, [2]]\n", "nested flow collections"},
		{"a: [1, 2\n", "does not end on its line"},
		{"a: 'x' y\n", "text after a quoted scalar"},
		{"a: b: c\n", "a mapping on the line of its key"},
		{"- a\nb: 1\n", "unexpected indentation"},
		{"a: \"\\q\"\n", "an unknown escape"},
		{"%YAML 1.1\na: 1\n", "directives"},
	} {
		_, err := Parse([]byte(tc.src))
		if tc.want == "" {
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.src, err, tc.want)
		}
	}
}

// FuzzParse: any input is parsed or refused, never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"a: 1\n", "a:\n- x\n- y: [1, 'b']\n", "a: {b: c}\n", "'a': \"b\\u0041\"\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse([]byte(s))
		if err == nil && n != nil {
			_ = dump(n)
		}
	})
}
