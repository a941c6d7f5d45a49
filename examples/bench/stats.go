package main

import (
	"bytes"
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

// server measures the CPU time of a PostgreSQL server that runs on this
// machine: its postmaster and every process the postmaster forked,
// running or already reaped. The zero value measures nothing.
type server struct{ postmaster int }

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on Linux.
const clockTicks = 100

// findServer returns the server of the backend whose pid the server
// reported (pg_backend_pid), if that backend is a postgres process on
// this machine, as seen in this process's /proc. On another host, in
// another pid namespace or without /proc, it returns the zero server.
func findServer(backendPID int) server {
	st, ok := procStat(backendPID)
	if !ok || st.comm != "postgres" {
		return server{}
	}
	if pm, ok := procStat(st.ppid); !ok || pm.comm != "postgres" {
		return server{}
	}
	return server{postmaster: st.ppid}
}

// cpu returns the server's CPU time so far: the postmaster's own, that of
// its reaped children, and that of its live ones. A child reaped between
// the postmaster's figures and the walk over its children would be in
// neither (a run ending as its pools close lost a backend's whole CPU
// that way), so the walk is taken again until the postmaster's reaped
// total held still around it.
func (s server) cpu() (time.Duration, bool) {
	if s.postmaster == 0 {
		return 0, false
	}
	for range 10 {
		before, ok := procStat(s.postmaster)
		if !ok {
			return 0, false
		}
		children, ok := s.childTicks()
		if !ok {
			return 0, false
		}
		after, ok := procStat(s.postmaster)
		if !ok {
			return 0, false
		}
		if after.cutime != before.cutime || after.cstime != before.cstime {
			continue // a child was reaped meanwhile
		}
		ticks := after.utime + after.stime + after.cutime + after.cstime + children
		return time.Duration(ticks) * time.Second / clockTicks, true
	}
	return 0, false
}

// childTicks sums the CPU ticks of the postmaster's live children.
func (s server) childTicks() (int64, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var ticks int64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok && st.ppid == s.postmaster {
			ticks += st.utime + st.stime
		}
	}
	return ticks, true
}

// stat is what the bench reads of /proc/<pid>/stat.
type stat struct {
	comm                         string
	ppid                         int
	utime, stime, cutime, cstime int64
}

func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses, so
	// the fields are counted from its last ')'.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return stat{}, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 15 {
		return stat{}, false
	}
	var st stat
	st.comm = string(b[open+1 : end])
	st.ppid, _ = strconv.Atoi(f[1])
	nums := []*int64{&st.utime, &st.stime, &st.cutime, &st.cstime}
	for i, p := range nums {
		v, err := strconv.ParseInt(f[11+i], 10, 64)
		if err != nil {
			return stat{}, false
		}
		*p = v
	}
	return st, true
}
