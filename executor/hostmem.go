package executor

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"

	"github.com/fsdpc/fsdpc/ir"
)

// hostBound is one bound on the host memory this process can still take,
// and what sets it, for the message when a run does not fit.
type hostBound struct {
	bytes int64
	what  string
}

// fallbackMemory is assumed where no bound can be read at all.
const fallbackMemory = 8 << 30

// hostMemory is the tightest bound this process can see on the memory it
// may still take: the system's MemAvailable, the memory limit of its
// cgroup (v2 memory.max, v1 memory.limit_in_bytes, on its own cgroup and
// every ancestor) less what the cgroup uses, and its address-space limit
// (RLIMIT_AS, ulimit -v) less what it has mapped. Sizing from MemAvailable
// alone, a run in a 1 GiB container was killed without a word, and one
// under ulimit -v died with the Go runtime's out-of-memory dump. root is
// "/" but for tests, which give a tree of fake /proc and /sys files.
func hostMemory(root string, p probes) hostBound {
	best := hostBound{bytes: fallbackMemory, what: "a guess (no /proc/meminfo to read)"}
	found := false
	consider := func(b hostBound) {
		if !found || b.bytes < best.bytes {
			best, found = b, true
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/meminfo")); err == nil {
		if kb, ok := procField(b, "MemAvailable:"); ok {
			consider(hostBound{satMul(kb, 1024), "the MemAvailable of /proc/meminfo"})
		}
	}
	for _, b := range cgroupBounds(root) {
		consider(b)
	}
	if limit, ok := p.rlimitAS(); ok {
		var mapped int64
		if b, err := os.ReadFile(filepath.Join(root, "proc/self/status")); err == nil {
			if kb, ok := procField(b, "VmSize:"); ok {
				mapped = satMul(kb, 1024)
			}
		}
		// Everything mapped counts, the Go runtime's reservations too (a
		// fresh Go program maps about 1.2 GiB by VmSize), but the heap's
		// free pages are reused without mapping more.
		mapped = max(mapped-p.heapReusable(), 0)
		l := int64(min(limit, math.MaxInt64))
		consider(hostBound{max(l-mapped, 0), fmt.Sprintf("the address-space limit (RLIMIT_AS, ulimit -v) of %s less the %s mapped", ir.FormatBytes(l), ir.FormatBytes(mapped))})
	}
	return best
}

// probes read what is not a file: the real ones, or a test's.
type probes struct {
	// rlimitAS is the address-space limit (ok false: unlimited).
	rlimitAS func() (limit uint64, ok bool)
	// heapReusable is the Go heap's mapped bytes free for reuse.
	heapReusable func() int64
}

var realProbes = probes{rlimitAS, heapReusable}

// heapReusable is the Go heap's mapped but unused bytes: free, or
// returned to the system and still mapped.
func heapReusable() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	var n uint64
	for _, x := range s {
		if x.Value.Kind() == metrics.KindUint64 {
			n += x.Value.Uint64()
		}
	}
	return int64(min(n, math.MaxInt64))
}

// rlimitAS reads this process's RLIMIT_AS.
func rlimitAS() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil || r.Cur == math.MaxUint64 { // RLIM_INFINITY
		return 0, false
	}
	return r.Cur, true
}

// procField reads the number of a "Name:   123 kB" line of a /proc file,
// or of a "name 123" line of a cgroup's memory.stat (name given with its
// space).
func procField(b []byte, name string) (int64, bool) {
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil && n >= 0 {
					return n, true
				}
			}
		}
	}
	return 0, false
}

// cgroupVersion names the files that hold a cgroup's memory limit, usage
// and reclaimable page cache, in cgroup v2 and v1.
type cgroupVersion struct {
	limit, usage, stat, inactive string
}

var (
	cgroupV2 = cgroupVersion{"memory.max", "memory.current", "memory.stat", "inactive_file"}
	cgroupV1 = cgroupVersion{"memory.limit_in_bytes", "memory.usage_in_bytes", "memory.stat", "total_inactive_file"}
)

// cgroupBounds returns a bound for each memory-limited cgroup on the path
// from the process's own cgroup up to the root of its hierarchy (a parent's
// limit binds its children too), in v2 and, where mounted, v1.
func cgroupBounds(root string) []hostBound {
	own, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return nil
	}
	mounts, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return nil
	}
	v2path, v1path := cgroupPaths(own)
	var out []hostBound
	for _, m := range cgroupMounts(mounts) {
		p, v := v2path, cgroupV2
		if !m.v2 {
			p, v = v1path, cgroupV1
		}
		if p == "" {
			continue
		}
		// The mount shows the hierarchy from m.root down: a container's
		// cgroup namespace makes its own cgroup "/", mounted at root "/".
		rel, ok := strings.CutPrefix(p, m.root)
		if !ok || rel != "" && m.root != "/" && !strings.HasPrefix(rel, "/") {
			continue
		}
		for dir := path.Clean("/" + rel); ; dir = path.Dir(dir) {
			if b, ok := cgroupBound(filepath.Join(root, m.point, dir), v); ok {
				out = append(out, b)
			}
			if dir == "/" {
				break
			}
		}
	}
	return out
}

// cgroupPaths reads /proc/self/cgroup: the v2 path ("0::/path") and the
// v1 memory controller's ("N:...,memory,...:/path").
func cgroupPaths(b []byte) (v2, v1 string) {
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2 = f[2]
		case containsField(f[1], "memory"):
			v1 = f[2]
		}
	}
	return v2, v1
}

type cgroupMount struct {
	root, point string
	v2          bool
}

// cgroupMounts reads /proc/self/mountinfo for the cgroup2 mount and the
// cgroup v1 mount of the memory controller. A line is "ID PARENT MAJ:MIN
// ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS"
// (proc(5)).
func cgroupMounts(b []byte) []cgroupMount {
	var out []cgroupMount
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{root: unescapeMount(f[3]), point: unescapeMount(f[4])}
		switch {
		case g[0] == "cgroup2":
			m.v2 = true
		case g[0] == "cgroup" && containsField(g[2], "memory"):
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func containsField(list, name string) bool {
	for f := range strings.SplitSeq(list, ",") {
		if f == name {
			return true
		}
	}
	return false
}

// cgroupBound is what a cgroup directory still allows: its limit less its
// usage, not counting inactive page cache, which the kernel reclaims
// before it kills (the "working set" of Kubernetes' cAdvisor: usage less
// inactive_file). No bound where the limit is "max" (v2) or the
// effectively unlimited page-rounded 2^63 (v1), or unreadable.
func cgroupBound(dir string, v cgroupVersion) (hostBound, bool) {
	raw, err := os.ReadFile(filepath.Join(dir, v.limit))
	if err != nil {
		return hostBound{}, false
	}
	limit, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || limit <= 0 || limit >= math.MaxInt64/2 {
		return hostBound{}, false // "max", or v1's unlimited 9223372036854771712
	}
	var used int64
	if raw, err := os.ReadFile(filepath.Join(dir, v.usage)); err == nil {
		used, _ = strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	}
	if raw, err := os.ReadFile(filepath.Join(dir, v.stat)); err == nil {
		if n, ok := procField(raw, v.inactive+" "); ok {
			used -= min(n, used)
		}
	}
	return hostBound{max(limit-max(used, 0), 0), fmt.Sprintf("the cgroup memory limit %s (%s) less the %s in use", ir.FormatBytes(limit), filepath.Join(dir, v.limit), ir.FormatBytes(max(used, 0)))}, true
}

// satMul is a·b, or MaxInt64 where that overflows.
func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}
