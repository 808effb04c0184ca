package checkpoint

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// Save and load times follow the documented model: each node moves its
// ranks' bytes at its rate (or its share of the aggregate), after the
// slowest host copy on it.
func TestEstimate(t *testing.T) {
	l := tinyLayout(t, 8, "") // 2 nodes of 4
	if l.HostBandwidth <= 0 {
		t.Fatal("the plan has no host bandwidth")
	}
	for _, tc := range []struct {
		storage, aggregate string
		rate               float64
	}{
		{"1GB/s", "", 1e9},
		{"1GB/s", "1GB/s", 0.5e9}, // two nodes share the aggregate
		{"nvme", "", 3.8e9},
		{"shared", "", 20e9},
	} {
		st, err := ParseStorage(tc.storage, tc.aggregate)
		if err != nil {
			t.Fatal(err)
		}
		e := l.Estimate(st)
		if !near(e.Save.Rate, tc.rate) {
			t.Errorf("%s/%s: save rate %g, want %g", tc.storage, tc.aggregate, e.Save.Rate, tc.rate)
		}
		var want, stall float64
		var staging int64
		writes := l.rankWrites()
		for n := range 2 {
			var bytes int64
			var copyTime float64
			for r := 4 * n; r < 4*n+4; r++ {
				m, o := writes[r].model, writes[r].optim
				bytes += m + o
				copyTime = max(copyTime, float64(m+o)/l.HostBandwidth)
				staging = max(staging, m+o)
			}
			want = max(want, copyTime+float64(bytes)/tc.rate)
			stall = max(stall, copyTime)
		}
		if !near(e.Save.Time, want) || !near(e.Stall, stall) || e.StagingBytes != staging {
			t.Errorf("%s: save %g s stall %g s staging %d, want %g, %g, %d", tc.storage, e.Save.Time, e.Stall, e.StagingBytes, want, stall, staging)
		}
		// Loading under the same plan reads what was saved, and every
		// rank reads every step count.
		var read int64
		for _, c := range e.Load.Ranks {
			read += c.Bytes()
		}
		if m, o := l.Totals(); read != m+o+7*stepBytes(l) {
			t.Errorf("load reads %d bytes, the checkpoint has %d and %d of step counts", read, m+o, stepBytes(l))
		}
	}
	if e := l.Estimate(Presets["nvme"]); e.Save.Ranks[0].Files != 2 || e.Save.Ranks[1].Files != 1 {
		t.Errorf("files: rank 0 %d (data and .metadata), rank 1 %d", e.Save.Ranks[0].Files, e.Save.Ranks[1].Files)
	}
}

// HSDP replicas each load their own copy: a load reads R times what a
// save writes.
func TestEstimateHSDP(t *testing.T) {
	l := tinyLayout(t, 8, "2x4")
	e := l.Estimate(Presets["shared"])
	var read, written int64
	for r := range 8 {
		read += e.Load.Ranks[r].Bytes()
		written += e.Save.Ranks[r].Bytes()
	}
	if read != 2*(written-stepBytes(l))+8*stepBytes(l) {
		t.Errorf("HSDP 2×4 reads %d bytes, writes %d; want twice the shards and every step count on every rank", read, written)
	}
}

func TestParseStorage(t *testing.T) {
	for _, bad := range [][2]string{{"fast", ""}, {"0GB/s", ""}, {"5GB", ""}, {"nvme", "x"}, {"nvme", "-1GB/s"}} {
		if _, err := ParseStorage(bad[0], bad[1]); err == nil {
			t.Errorf("ParseStorage(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

// stepBytes is the size of the layout's step counts.
func stepBytes(l *Layout) int64 {
	var n int64
	for _, x := range l.Tensors {
		if x.ShardDim < 0 {
			n += x.Bytes()
		}
	}
	return n
}

// BenchmarkEstimate: tinyModel over 4,096 ranks in one shard group, each
// of its 28 state entries cut into 4,096 chunks.
func BenchmarkEstimate(b *testing.B) {
	l := tinyLayout(b, 4096, "")
	b.ResetTimer()
	for range b.N {
		l.Estimate(Presets["nvme"])
	}
}
