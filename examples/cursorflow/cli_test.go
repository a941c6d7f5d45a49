package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/clirun"
)

// cliBinary builds the cursorflow command once for the package's tests
// that run it as a user would (killed, resumed, followed) and returns its
// path.
func cliBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go toolchain not on PATH")
	}
	cliBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "cursorflow-cli-")
		if err != nil {
			cliBuild.err = err
			return
		}
		cliBuild.dir = dir
		cliBuild.path = filepath.Join(dir, "cursorflow")
		if out, err := exec.Command("go", "build", "-o", cliBuild.path, ".").CombinedOutput(); err != nil {
			cliBuild.err = &buildError{err: err, out: string(out)}
		}
	})
	if cliBuild.err != nil {
		t.Fatalf("build cursorflow: %v", cliBuild.err)
	}
	return cliBuild.path
}

var cliBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// removeCLIBuild deletes the cached build (TestMain calls it at the end).
func removeCLIBuild() {
	if cliBuild.dir != "" {
		_ = os.RemoveAll(cliBuild.dir)
	}
}

// startRun starts cmd, a `cursorflow run`, and returns the execution id it
// prints first and its stdout, to read on or drain.
func startRun(t *testing.T, cmd *exec.Cmd) (string, *bufio.Reader) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("reading execution id: %v", err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "execution ")), out
}

// killWhen SIGKILLs cmd once the side-effect file side holds n
// occurrences of mark, failing the test if that takes longer than within.
func killWhen(t *testing.T, cmd *exec.Cmd, side, mark string, n int, within time.Duration) {
	t.Helper()
	signalWhen(t, cmd, syscall.SIGKILL, side, mark, n, within)
	_ = cmd.Wait()
}

// killWhenRecorded SIGKILLs cmd once the events of execution id in the
// SQLite log at path satisfy cond, failing the test if that takes longer
// than within. Side effects run before their outcome is on record, so a
// kill timed by them may land before anything is.
func killWhenRecorded(t *testing.T, cmd *exec.Cmd, path, id string, cond func([]eventlog.Event) bool, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for !cond(clirun.Recorded(t, ctx, path, id)) {
		select {
		case <-ctx.Done():
			t.Fatalf("no progress on record before the kill: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

// signalWhen sends sig to cmd once the side-effect file side holds n
// occurrences of mark, failing the test if that takes longer than within.
func signalWhen(t *testing.T, cmd *exec.Cmd, sig os.Signal, side, mark string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(side)
		if strings.Count(string(b), mark) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress before the kill; side effects: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// completedBases returns the loop index (the base id's part after
// marker, as in "start#1/shard3" or "items#1/i4") of each command of step
// the events record as completed.
func completedBases(evs []eventlog.Event, step, marker string) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandCompleted && ev.Step == step {
			base := ev.CommandID[:strings.LastIndexByte(ev.CommandID, '@')]
			out = append(out, base[strings.LastIndex(base, marker)+len(marker):])
		}
	}
	return out
}
