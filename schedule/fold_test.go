package schedule

import (
	"strings"
	"testing"
)

func TestFoldRepeats(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{
			name: "layers step by one",
			in: "groups 4\ngroup (root)\ngroup layers.0\n  shard 416.02 MiB @0\ngroup layers.1\n  shard 416.02 MiB @0\n" +
				"group layers.2\n  shard 416.02 MiB @0\ngroup layers.3\n  shard 416.02 MiB @0\nend",
			want: "groups 4\ngroup (root)\n4× {\n  group layers.{0..3}\n    shard 416.02 MiB @0\n}\nend",
		},
		{
			name: "a stride of two, several numbers",
			in:   "  op 0 buf 10\n  op 2 buf 11\n  op 4 buf 12\n  op 6 buf 13",
			want: "  4× {\n    op {0,2,..,6} buf {10..13}\n  }",
		},
		{
			name: "two repeats stay",
			in:   "a 1\na 2",
			want: "a 1\na 2",
		},
		{
			name: "a number off its progression stops the fold",
			in:   "x 1\nx 2\nx 3\nx 5",
			want: "3× {\n  x {1..3}\n}\nx 5",
		},
		{
			name: "sizes that differ are not folded",
			in:   "alloc 1 MiB\nalloc 7 MiB\nalloc 2 MiB",
			want: "alloc 1 MiB\nalloc 7 MiB\nalloc 2 MiB",
		},
		{
			name: "leading zeros stay text",
			in:   "g.1 416.02\ng.2 416.02\ng.3 416.02",
			want: "3× {\n  g.{1..3} 416.02\n}",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(FoldRepeats(strings.Split(tc.in, "\n")), "\n")
			if got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
