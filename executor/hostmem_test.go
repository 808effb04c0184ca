package executor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostMemory reads fake /proc and /sys trees: the tightest of
// MemAvailable, every limited cgroup from the process's own up to the
// root (v2 and v1), and RLIMIT_AS less what is mapped.
func TestHostMemory(t *testing.T) {
	const (
		MiB = int64(1) << 20
		GiB = int64(1) << 30
	)
	meminfo := "MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:   16777216 kB\n" // 16 GiB
	v2mount := "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	v1mount := "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	unlimitedV1 := "9223372036854771712\n"
	for _, c := range []struct {
		name  string
		files map[string]string
		as    uint64 // RLIMIT_AS, 0 unlimited
		want  int64
		what  string
	}{
		{"meminfo only", map[string]string{"proc/meminfo": meminfo}, 0, 16 * GiB, "MemAvailable"},
		{"nothing readable", map[string]string{}, 0, 8 * GiB, "a guess"},
		{"meminfo without MemAvailable", map[string]string{"proc/meminfo": "MemTotal: 1 kB\nMemAvailable: lots kB\n"}, 0, 8 * GiB, "a guess"},
		{"v2 own limit less working set", map[string]string{
			"proc/meminfo":                              meminfo,
			"proc/self/cgroup":                          "0::/job/step\n",
			"proc/self/mountinfo":                       v2mount,
			"sys/fs/cgroup/job/step/memory.max":         "1073741824\n",
			"sys/fs/cgroup/job/step/memory.current":     "314572800\n",                            // 300 MiB
			"sys/fs/cgroup/job/step/memory.stat":        "anon 1\ninactive_file 104857600\nx 2\n", // 100 MiB reclaimable
			"sys/fs/cgroup/job/memory.max":              "max\n",
			"sys/fs/cgroup/memory.max":                  "max\n",
			"sys/fs/cgroup/job/step/memory.swap.max":    "0\n",
			"sys/fs/cgroup/job/step/cgroup.controllers": "memory\n",
		}, 0, GiB - 200*MiB, "sys/fs/cgroup/job/step/memory.max"},
		{"v2 parent limit binds", map[string]string{
			"proc/meminfo":                          meminfo,
			"proc/self/cgroup":                      "0::/job/step\n",
			"proc/self/mountinfo":                   v2mount,
			"sys/fs/cgroup/job/step/memory.max":     "max\n",
			"sys/fs/cgroup/job/memory.max":          "536870912\n",
			"sys/fs/cgroup/job/memory.current":      "0\n",
			"sys/fs/cgroup/job/step/memory.current": "0\n",
		}, 0, 512 * MiB, "sys/fs/cgroup/job/memory.max"},
		{"v2 over its limit leaves nothing", map[string]string{
			"proc/self/cgroup":               "0::/a\n",
			"proc/self/mountinfo":            v2mount,
			"sys/fs/cgroup/a/memory.max":     "1048576\n",
			"sys/fs/cgroup/a/memory.current": "2097152\n",
		}, 0, 0, "cgroup memory limit 1.00 MiB"},
		{"v2 in a cgroup namespace", map[string]string{
			"proc/meminfo":                 meminfo,
			"proc/self/cgroup":             "0::/\n",
			"proc/self/mountinfo":          v2mount,
			"sys/fs/cgroup/memory.max":     "2147483648\n",
			"sys/fs/cgroup/memory.current": "0\n",
		}, 0, 2 * GiB, "sys/fs/cgroup/memory.max"},
		{"v1 container without a namespace", map[string]string{
			"proc/meminfo":        meminfo,
			"proc/self/cgroup":    "9:name=systemd:/\n4:memory:/docker/abc\n3:cpuset:/\n",
			"proc/self/mountinfo": strings.Replace(v1mount, " / /sys/fs/cgroup/memory", " /docker/abc /sys/fs/cgroup/memory", 1),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/memory.usage_in_bytes": "536870912\n",
			"sys/fs/cgroup/memory/memory.stat":           "inactive_file 999\ntotal_inactive_file 268435456\n",
		}, 0, 768 * MiB, "memory.limit_in_bytes"},
		{"v1 unlimited (this machine's)", map[string]string{
			"proc/meminfo":        meminfo,
			"proc/self/cgroup":    "4:memory:/process_api/f3e9\n0::/\n",
			"proc/self/mountinfo": v1mount + "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
			"sys/fs/cgroup/memory/process_api/f3e9/memory.limit_in_bytes": unlimitedV1,
			"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":      unlimitedV1,
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                  unlimitedV1,
		}, 0, 16 * GiB, "MemAvailable"},
		{"v1 and a mount point with a space", map[string]string{
			"proc/self/cgroup":                      "4:cpu,memory:/x\n",
			"proc/self/mountinfo":                   "35 31 0:32 / /sys/fs/cg\\040mem rw - cgroup cgroup rw,cpu,memory\n",
			"sys/fs/cg mem/x/memory.limit_in_bytes": "3145728\n",
		}, 0, 3 * MiB, "cg mem/x"},
		{"a cgroup outside the mount's root is not read", map[string]string{
			"proc/meminfo":               meminfo,
			"proc/self/cgroup":           "0::/other/x\n",
			"proc/self/mountinfo":        strings.Replace(v2mount, " / /sys", " /mine /sys", 1),
			"sys/fs/cgroup/x/memory.max": "1\n",
			"sys/fs/cgroup/memory.max":   "1\n",
		}, 0, 16 * GiB, "MemAvailable"},
		{"RLIMIT_AS less the mapped, heap reuse counted free", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/status": "Name:\tfsdpc\nVmPeak:\t 9999999 kB\nVmSize:\t 1048576 kB\n", // 1 GiB mapped
		}, 3 << 30, 2*GiB + 64*MiB, "RLIMIT_AS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for name, text := range c.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			probe := probes{
				rlimitAS:     func() (uint64, bool) { return c.as, c.as != 0 },
				heapReusable: func() int64 { return 64 * MiB },
			}
			got := hostMemory(root, probe)
			if got.bytes != c.want || !strings.Contains(got.what, c.what) {
				t.Errorf("hostMemory = %d (%s), want %d (%q)", got.bytes, got.what, c.want, c.what)
			}
		})
	}
}
