// Package cores tells how many cores this process may keep busy: the
// CPUs it may run on, bounded by a cgroup CPU quota (a container's
// resources.limits.cpu), so that worker pools are sized by what the
// worker sees rather than by constants.
package cores

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// cgroupCPUMax is the cgroup v2 quota file; a variable for tests.
var cgroupCPUMax = "/sys/fs/cgroup/cpu.max"

// Usable is the number of cores this process can use at once, at least 1:
// runtime.NumCPU (the affinity mask) bounded by the cgroup v2 quota,
// rounded up (a quota of 1.5 cores is 2).
func Usable() int {
	n := runtime.NumCPU()
	if q, ok := quota(cgroupCPUMax); ok {
		n = min(n, q)
	}
	return max(n, 1)
}

// quota reads a cgroup v2 cpu.max file ("max 100000" or "150000 100000")
// as whole cores, rounded up; ok is false without a quota.
func quota(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	limit, err1 := strconv.ParseInt(f[0], 10, 64)
	period, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || limit <= 0 || period <= 0 {
		return 0, false
	}
	return int((limit + period - 1) / period), true
}
