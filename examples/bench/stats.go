package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// spread is the median, minimum and maximum of a set of values.
type spread struct {
	med, lo, hi float64
	n           int
}

func spreadOf(vs []float64) spread {
	if len(vs) == 0 {
		return spread{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{med: m, lo: s[0], hi: s[len(s)-1], n: len(s)}
}

// format prints the median and, over more than one value, the range:
// "12,345 [11,900–13,010]".
func (s spread) format(f func(float64) string) string {
	if s.n == 0 {
		return "-"
	}
	if s.n == 1 {
		return f(s.med)
	}
	return f(s.med) + " [" + f(s.lo) + "–" + f(s.hi) + "]"
}

func rateText(v float64) string { return thousands(int64(math.Round(v))) }

func ratioText(v float64) string { return fmt.Sprintf("%.2f", v) }

func oneDecimal(v float64) string { return fmt.Sprintf("%.1f", v) }

// thousands formats n with comma separators.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// percentile returns the p-th percentile (0..100) of sorted values.
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// cpuTime is the CPU time (user plus system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineTicks returns the machine's busy and total CPU ticks so far,
// across all its CPUs, from /proc/stat's first line; ok is false where
// there is none (not Linux).
func machineTicks() (busy, total uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, false
	}
	// user nice system idle iowait irq softirq steal ...: idle and iowait
	// are the idle time, the rest busy.
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if i >= 8 { // guest time is counted in user already
			break
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total, true
}
