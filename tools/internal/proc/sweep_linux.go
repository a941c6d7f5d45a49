package proc

import (
	"bytes"
	"os"
	"strconv"
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

// scan SIGKILLs the processes whose environment holds one of markers. A
// killed process's environment reads empty (a zombie has no memory), so
// a round that kills nothing ends the scan.
func scan(markers map[string]bool) {
	for range sweepRounds {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		killed := false
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !hasVar(env, markers) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = true
			}
		}
		if !killed {
			return
		}
	}
}

// hasVar reports whether env, NUL-separated NAME=value pairs as
// /proc/PID/environ holds them, holds one of the pairs of vars.
func hasVar(env []byte, vars map[string]bool) bool {
	for len(env) > 0 {
		i := bytes.IndexByte(env, 0)
		if i < 0 {
			i = len(env)
		}
		if vars[string(env[:i])] {
			return true
		}
		env = env[min(i+1, len(env)):]
	}
	return false
}
