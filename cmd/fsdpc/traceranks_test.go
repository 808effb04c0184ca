package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseRanks(t *testing.T) {
	for _, c := range []struct {
		spec       string
		world, gpn int
		want       []int
		err        string
	}{
		{"", 4, 8, []int{0, 1, 2, 3}, ""},
		{"", 64, 8, []int{0, 1, 2, 3, 4, 5, 6, 7}, ""},
		{"all", 3, 8, []int{0, 1, 2}, ""},
		{"0,3,8-10,3", 16, 8, []int{0, 3, 8, 9, 10}, ""},
		{"16", 16, 8, nil, "outside the plan's ranks 0-15"},
		{"-1", 16, 8, nil, "is not a rank"},
		{"5-2", 16, 8, nil, "is not a range"},
		{"x", 16, 8, nil, "is not a rank"},
	} {
		got, err := parseRanks(c.spec, c.world, c.gpn)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: got %v, %v; want an error with %q", c.spec, got, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %v, %v; want %v", c.spec, got, err, c.want)
		}
	}
}
