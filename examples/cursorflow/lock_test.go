package main

import (
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog/eventlogurl"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestOneDriverPerExecution: while `cursorflow run` drives an execution,
// a `cursorflow resume` of it is refused, as a user who resumes too early
// would otherwise have two processes writing conflicting decisions to one
// log. Once the run is killed (kill -9), resume takes the execution over
// and completes it: the lock goes with the process that held it.
func TestOneDriverPerExecution(t *testing.T) {
	bin := cliBinary(t)
	logs := map[string]func(t *testing.T, dir string) string{
		"sqlite": func(t *testing.T, dir string) string { return "sqlite:" + filepath.Join(dir, "events.db") },
		"postgres": func(t *testing.T, _ string) string {
			u, err := url.Parse(testenv.Postgres(t))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set(eventlogurl.SchemaParam, "cli_lock_"+testenv.RandomSuffix(t))
			u.RawQuery = q.Encode()
			return u.String()
		},
	}
	for name, logURL := range logs {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			eventlog := logURL(t, dir)
			gate := filepath.Join(dir, "gate")
			pb := filepath.Join(dir, "flow.yaml")
			// The step waits for the test to open the gate.
			src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: gated}
workflow:
  - step: start
    tool: {kind: shell, command: "while [ ! -e ` + gate + ` ]; do sleep 0.02; done; echo passed"}
`
			if err := os.WriteFile(pb, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run := exec.CommandContext(ctx, bin, "run", pb, "--eventlog", eventlog)
			id, _ := startRun(t, run)
			out, err := exec.CommandContext(ctx, bin, "resume", id, "--eventlog", eventlog).CombinedOutput()
			if code := exitStatus(err); code != exitInvalid || !strings.Contains(string(out), "another process is driving this execution") {
				t.Fatalf("resume during the run: exit %d, %s", code, out)
			}
			if err := run.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = run.Wait()

			resume := exec.CommandContext(ctx, bin, "resume", id, "--eventlog", eventlog, "--json")
			type result struct {
				out []byte
				err error
			}
			done := make(chan result, 1)
			go func() {
				b, err := resume.CombinedOutput()
				done <- result{b, err}
			}()
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if code := exitStatus(r.err); code != exitOK || !strings.Contains(string(r.out), `"status":"completed"`) {
				t.Fatalf("resume after the kill: exit %d, %s", code, r.out)
			}
		})
	}
}

// exitStatus is the exit code of a finished command whose Run (or Output)
// returned err.
func exitStatus(err error) int {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
