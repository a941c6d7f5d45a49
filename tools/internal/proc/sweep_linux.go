package proc

import (
	"bytes"
	"iter"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// sweepRounds bounds how many times a sweep scans the process table: a
// process may fork between a scan and its kill, and the next scan finds
// the fork.
const sweepRounds = 10

// Sweeper kills the processes that left their call's process group (see
// Start). It batches the sweeps asked for at once (an execution
// cancelled with many commands running): one scan of the process table
// serves them all, where a scan each would read every process's
// environment as many times. A tool keeps one for its calls; the zero
// value is ready, and a nil *Sweeper scans once per sweep.
type Sweeper struct {
	mu       sync.Mutex
	pending  map[string]bool // markers the next scan looks for
	done     chan struct{}   // closed when the scan that takes pending ends
	scanning bool
}

// sweep SIGKILLs every process of this user whose environment holds
// marker (a "NAME=value" pair), wherever it is: one that left the call's
// process group (setsid, start_new_session=True) is found this way. It
// returns once a scan that looked for marker has ended.
func (sw *Sweeper) sweep(marker string) {
	if sw == nil {
		scan(map[string]bool{marker: true})
		return
	}
	sw.mu.Lock()
	if sw.pending == nil {
		sw.pending, sw.done = map[string]bool{}, make(chan struct{})
	}
	sw.pending[marker] = true
	if sw.scanning {
		done := sw.done
		sw.mu.Unlock()
		<-done
		return
	}
	sw.scanning = true
	for len(sw.pending) > 0 {
		markers, done := sw.pending, sw.done
		sw.pending, sw.done = map[string]bool{}, make(chan struct{})
		sw.mu.Unlock()
		scan(markers)
		close(done)
		sw.mu.Lock()
	}
	sw.scanning = false
	sw.mu.Unlock()
}

// scan SIGKILLs the processes whose environment holds one of markers.
func scan(markers map[string]bool) {
	killWhere(func(env []byte) bool { return hasVar(env, markers) })
}

// killWhere SIGKILLs every process of this user but this one whose
// environment (NUL-separated NAME=value pairs, as /proc/PID/environ
// holds them) kill approves, and returns how many it killed. It scans the
// process table again after a round that killed some, since a process
// may fork between a scan and its kill; a killed process's environment
// reads empty (a zombie has no memory), so a round that kills nothing
// ends it, as do sweepRounds rounds.
func killWhere(kill func(env []byte) bool) int {
	killed := 0
	for range sweepRounds {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return killed
		}
		round := 0
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !kill(env) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				round++
			}
		}
		killed += round
		if round == 0 {
			return killed
		}
	}
	return killed
}

// envPairs yields the NAME=value pairs of env, NUL-separated as
// /proc/PID/environ holds them.
func envPairs(env []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for len(env) > 0 {
			i := bytes.IndexByte(env, 0)
			if i < 0 {
				i = len(env)
			}
			if !yield(env[:i]) {
				return
			}
			env = env[min(i+1, len(env)):]
		}
	}
}

// hasVar reports whether env, NUL-separated NAME=value pairs as
// /proc/PID/environ holds them, holds one of the pairs of vars.
func hasVar(env []byte, vars map[string]bool) bool {
	for kv := range envPairs(env) {
		if vars[string(kv)] {
			return true
		}
	}
	return false
}

// ownerID names this process for the markers it puts in its children's
// environments: its pid and its start time (in clock ticks since boot, as
// /proc/PID/stat gives it), which tell it apart from a later process
// given the same pid.
var ownerID = sync.OnceValue(func() string {
	return strconv.Itoa(os.Getpid()) + "." + startTime(os.Getpid())
})

// startTime returns the start time of process pid as /proc/PID/stat's
// 22nd field holds it, or "" when the process does not exist or has
// ended (a zombie its parent has not reaped yet: a killed worker whose
// parent, or init, is slow to wait for it).
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name, in parentheses, may hold spaces: count the
	// fields after its closing one (the 3rd field is the first there).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return ""
	}
	return fields[19]
}

// SweepOrphans SIGKILLs the processes (of this user) that a call of a
// shell or python task started in a process that has died since: a
// worker killed with SIGKILL, or by the OOM killer, takes its calls'
// children with it (they die with their parent), but not what those
// started, which would run on, orphaned, while the command runs again
// elsewhere. A process's marker (MarkerPrefix) names the process that
// started its call; one whose owner is gone, or whose pid now belongs to
// a process started later, is an orphan. Processes of live owners (other
// workers on the machine) are left alone. It returns how many it killed.
func SweepOrphans() int {
	alive := map[string]bool{ownerID(): true}
	return killWhere(func(env []byte) bool {
		owner, ok := markerOwner(env)
		if !ok {
			return false
		}
		live, seen := alive[owner]
		if !seen {
			live = ownerAlive(owner)
			alive[owner] = live
		}
		return !live
	})
}

// markerOwner returns the owner id of the first MarkerPrefix variable in
// env (NUL-separated NAME=value pairs); ok is false when there is none,
// or its value names no owner (a marker of a release that wrote "1").
func markerOwner(env []byte) (owner string, ok bool) {
	for kv := range envPairs(env) {
		name, v, _ := strings.Cut(string(kv), "=")
		if !strings.HasPrefix(name, MarkerPrefix) {
			continue
		}
		if pid, start, found := strings.Cut(v, "."); found && pid != "" && start != "" {
			return v, true
		}
		return "", false
	}
	return "", false
}

// ownerAlive reports whether the process an owner id names still runs.
func ownerAlive(owner string) bool {
	pidText, start, _ := strings.Cut(owner, ".")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		// Not an id this package writes: not ours to judge.
		return true
	}
	return startTime(pid) == start
}
