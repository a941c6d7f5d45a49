package proc

import (
	"context"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/tools/internal/proc/proctest"
)

func TestHasVar(t *testing.T) {
	t.Parallel()
	env := []byte("A=1\x00CURSORFLOW_PROC_ab=1\x00B=2")
	for v, want := range map[string]bool{"A=1": true, "CURSORFLOW_PROC_ab=1": true, "B=2": true, "CURSORFLOW_PROC_a": false, "B=": false} {
		if got := hasVar(env, map[string]bool{v: true, "C=3": true}); got != want {
			t.Errorf("hasVar(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestConcurrentSweepsKillEach: sweeps asked for at once (batched into
// shared scans) each kill their own call's process, found by its
// environment alone.
func TestConcurrentSweepsKillEach(t *testing.T) {
	t.Parallel()
	const n = 8
	pids := make([]int, n)
	var wg sync.WaitGroup
	var sw Sweeper
	for i := range n {
		cmd := Command(context.Background(), "sleep", "30")
		if err := Start(cmd, &sw); err != nil {
			t.Fatal(err)
		}
		pids[i] = cmd.Process.Pid
		t.Cleanup(func() { _ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		marker := cmd.Env[len(cmd.Env)-1]
		// The marker is in the child's environment once it has exec'd.
		waitFor(t, func() bool {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/environ")
			return err == nil && hasVar(b, map[string]bool{marker: true})
		})
		wg.Add(1)
		go func() { defer wg.Done(); sw.sweep(marker) }()
	}
	wg.Wait()
	for _, pid := range pids {
		proctest.WaitGone(t, pid, "a swept process")
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}
