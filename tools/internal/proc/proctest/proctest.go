//go:build linux

// Package proctest holds what the tests of the tools that start processes
// share: waiting for a process they started to be gone.
package proctest

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// WaitGone fails t unless pid is gone, or a zombie its parent (init, for
// an orphan) has yet to reap, within 10 s; what says which process it is.
func WaitGone(t testing.TB, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		// The state follows the command name in parentheses.
		if i := strings.LastIndexByte(string(stat), ')'); err == nil && i > 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (process %d) still runs: %s", what, pid, stat)
		}
		time.Sleep(20 * time.Millisecond) // polling the process table with a deadline
	}
}
