package main

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"
)

// parseCase is one command line for a parse function: the arguments and
// either what they mean (want, and for a command with -fail-if the
// gates' expressions) or, when err is set, the exit code the parse stops
// with and a part of what it says on stderr.
type parseCase[T any] struct {
	args  []string
	want  T
	gates []string
	code  int
	err   string
}

// checkParse runs each case through parse, a command's parse step
// (parsePlanArgs and the like: the parsed arguments, or ok false with the
// exit code, having said why on stderr). gates, for a command that takes
// -fail-if, returns the parsed gates, which are compared by expression
// and left out of the comparison of the rest; nil for a command without.
func checkParse[T any](t *testing.T, parse func([]string, io.Writer) (T, int, bool), gates func(*T) *[]gate, cases map[string]parseCase[T]) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			a, code, ok := parse(tc.args, &stderr)
			if tc.err != "" {
				if ok || code != tc.code || !strings.Contains(stderr.String(), tc.err) {
					t.Fatalf("parsed %+v (ok %v, code %d, stderr %q); want exit %d saying %q", a, ok, code, stderr.String(), tc.code, tc.err)
				}
				return
			}
			if !ok {
				t.Fatalf("stopped with %d: %s", code, stderr.String())
			}
			var exprs []string
			if gates != nil {
				for _, g := range *gates(&a) {
					exprs = append(exprs, g.expr)
				}
				*gates(&a) = nil
			}
			if !reflect.DeepEqual(a, tc.want) || !reflect.DeepEqual(exprs, tc.gates) {
				t.Errorf("got %+v, gates %q; want %+v, gates %q", a, exprs, tc.want, tc.gates)
			}
		})
	}
}
