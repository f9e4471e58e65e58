package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ClockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on every Linux
// architecture Go supports (the kernel's exported value, independent of CONFIG_HZ).
const ClockTicks = 100

// ParseVmRSS returns VmRSS in bytes from the text of /proc/<pid>/status.
func ParseVmRSS(status string) (uint64, error) {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q: want \"<n> kB\"", sc.Text())
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS line %q: %w", sc.Text(), err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS line in /proc status")
}

// ParseStatCPU returns utime+stime from the text of /proc/<pid>/stat. The command name (field
// 2) is in parentheses and may hold spaces and parentheses itself, so fields are counted after
// its last ')': utime and stime are fields 14 and 15.
func ParseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field k is f[k-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: CPU time %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / ClockTicks, nil
}

// ProcessCPU is the user+system CPU time pid has used so far.
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	return ParseStatCPU(string(b))
}

// procCPU is ProcessCPU, 0 when pid is unknown or its CPU time cannot be read.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	d, err := ProcessCPU(pid)
	if err != nil {
		return 0
	}
	return d
}
