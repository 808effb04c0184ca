package planner_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
)

// TestMutatedZooModels is the hostile-input sweep over model files: every
// value of every zoo model, one at a time, replaced by an extreme or wrong
// one (zero, negative, 2^31 to 2^63-1, 1e308, non-float dtypes, empty
// strings, other modes). Whatever the input, loading and planning must end
// in a plan or a user error: never a panic and never "internal error". The
// plan, when there is one, has passed the planner's own verification.
// (About 5,300 mutations; 1,680 numeric and 3,588 string or boolean ones
// found no failure when this test was written.)
func TestMutatedZooModels(t *testing.T) {
	if testing.Short() {
		t.Skip("plans about 5,300 mutated zoo models; .ci/run's go test runs it")
	}
	numeric := regexp.MustCompile(`(?m)=\s*(-?[0-9][0-9_.e+]*)\s*($|#)`)
	textual := regexp.MustCompile(`(?m)=\s*("[^"\n]*"|true|false)\s*($|#)`)
	sweeps := []struct {
		re   *regexp.Regexp
		vals []string
	}{
		{numeric, []string{"0", "1", "-1", "3", "2147483648", "1099511627776", "4611686018427387904", "9223372036854775807", "1e308", "0.5"}},
		{textual, []string{`"int8"`, `"bool"`, `"fp8e4m3"`, `""`, `"none"`, `"full"`, `"selective-layer"`, `"fp16"`, "true", "false", `"*"`, `"merge"`, `"unsharded"`}},
	}
	for _, name := range plans.Names() {
		src, file, _ := plans.Source(name)
		s := string(src)
		for _, sw := range sweeps {
			for _, loc := range sw.re.FindAllStringSubmatchIndex(s, -1) {
				for _, v := range sw.vals {
					mutated := s[:loc[2]] + v + s[loc[3]:]
					if err := loadAndPlan(file, mutated); err != nil {
						t.Errorf("%s, %q set to %s: %v", name, lineAt(s, loc[2]), v, err)
					}
				}
			}
		}
	}
}

// loadAndPlan returns an error only for what must not happen: a panic or
// an internal error.
func loadAndPlan(file, src string) (failure error) {
	defer func() {
		if r := recover(); r != nil {
			failure = panicError{r}
		}
	}()
	m, err := ir.Load(file, []byte(src))
	if err == nil {
		_, err = planner.Plan(m, planner.Options{})
	}
	if err != nil && strings.Contains(err.Error(), "internal error") {
		first, _, _ := strings.Cut(err.Error(), "\n")
		return internalError(first)
	}
	return nil
}

type panicError struct{ v any }

func (p panicError) Error() string {
	return "panic: " + strings.TrimSpace(strings.SplitN(fmtAny(p.v), "\n", 2)[0])
}

type internalError string

func (e internalError) Error() string { return string(e) }

func fmtAny(v any) string {
	if e, ok := v.(error); ok {
		return e.Error()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return "non-error panic value"
}

func lineAt(s string, i int) string {
	a := strings.LastIndexByte(s[:i], '\n') + 1
	b := strings.IndexByte(s[i:], '\n')
	if b < 0 {
		return s[a:]
	}
	return s[a : i+b]
}
