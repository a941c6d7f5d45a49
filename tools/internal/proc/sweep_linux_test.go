package proc

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// TestSweepOrphansKillsWhatADeadWorkerLeft: a worker killed with SIGKILL
// takes its calls' children with it, but not what they started (a
// script's background job): those ran on, orphaned, while the command
// ran again elsewhere. A process whose marker names an owner that is
// gone is killed by the next worker's sweep; one whose owner runs (this
// process, another worker) is left alone, and so is one without a marker.
func TestSweepOrphansKillsWhatADeadWorkerLeft(t *testing.T) {
	// The owner: a process that has exited, as a SIGKILLed worker has.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	start := func(marker string) int {
		cmd := exec.Command("sleep", "60")
		cmd.Env = append(os.Environ(), marker)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Reaped by a goroutine, as an orphan is by init, so that a
		// killed one leaves no zombie for WaitGone to see.
		reaped := make(chan struct{})
		go func() { _ = cmd.Wait(); close(reaped) }()
		t.Cleanup(func() { _ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); <-reaped })
		return cmd.Process.Pid
	}
	// An owner that died but is not reaped yet (a zombie): its
	// /proc/PID/stat still holds its start time.
	zombie := exec.Command("sh", "-c", "exit 0")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = zombie.Wait() }()
	zpid := zombie.Process.Pid
	var zstart string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(zpid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if f[0] == "Z" {
			zstart = f[19]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sh did not exit: state %s", f[0])
		}
	}
	// The dead owner's pid with a start time no process of that pid has
	// (the pid may have been given to another process since).
	orphan := start(MarkerPrefix + "0123456789abcdef01234567=" + strconv.Itoa(dead.Process.Pid) + ".1")
	zombieOrphan := start(MarkerPrefix + "0123456789abcdef89abcdef=" + strconv.Itoa(zpid) + "." + zstart)
	ours := start(MarkerPrefix + "89abcdef0123456701234567=" + ownerID())
	plain := start("CURSORFLOW_TEST_PLAIN=1")
	// Another test process's tool may sweep the orphans first: what is
	// checked is that they are gone after this sweep.
	t.Logf("SweepOrphans killed %d processes", SweepOrphans())
	proctest.WaitGone(t, orphan, "the dead worker's orphan")
	proctest.WaitGone(t, zombieOrphan, "the orphan of a worker not reaped yet")
	for pid, what := range map[int]string{ours: "a live owner's process", plain: "a process without a marker"} {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("%s (pid %d) was killed: %v", what, pid, err)
		}
	}
}

func TestMarkerOwner(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"A=1\x00" + MarkerPrefix + "ab=42.1234\x00B=2": "42.1234",
		MarkerPrefix + "ab=1":                          "", // an older release's marker
		"A=1":                                          "",
	} {
		if got, _ := markerOwner([]byte(env)); got != want {
			t.Errorf("markerOwner(%q) = %q, want %q", env, got, want)
		}
	}
}
