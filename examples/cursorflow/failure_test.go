package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/internal/apitest"
)

// shellPlaybook runs command in its one step, start.
func shellPlaybook(command string) string {
	return `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: shell}
workflow:
  - step: start
    tool: {kind: shell, command: "` + command + `"}
`
}

// TestFailureWithoutField: a failure that names no field of the step's
// spec prints "failed at step S: error", not "failed at step S (): error",
// in a local run, a run on a server and a server's status.
func TestFailureWithoutField(t *testing.T) {
	t.Parallel()
	local := writeFile(t, "fail.yaml", shellPlaybook("exit 3"))
	code, out, errOut := cli("run", local, "--eventlog", "memory:", "--progress", "never")
	if code != exitInvalid || !strings.Contains(out, "failed at step start: shell: exit status 3\n") || strings.Contains(out, "()") {
		t.Errorf("local run: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}

	r := startRemote(t)
	remote := writeFile(t, "remote.yaml", remotePlaybook)
	code, out, errOut = cli("run", remote, "--server", r.URL(), "--token", remoteToken, "--set", "msg="+apitest.FailMsg, "--progress", "never")
	if code != exitInvalid || !strings.Contains(out, "failed at step start: ") || strings.Contains(out, "()") {
		t.Fatalf("run --server: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	id := executionID(t, out)
	code, out, errOut = cli("status", id, "--server", r.URL(), "--token", remoteToken)
	if code != exitOK || !strings.Contains(out, "failed at step start: ") || strings.Contains(out, "()") {
		t.Errorf("status: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// TestInterruptedMemoryRun: a run with the in-memory event log that is
// interrupted says that the execution cannot be resumed and how to make
// one that can, instead of suggesting `cursorflow resume ... --eventlog
// memory:`, which would find nothing; and it exits 130 as an interrupted
// run on any log does (it exited 1, as a failed run does), having let its
// running command finish.
func TestInterruptedMemoryRun(t *testing.T) {
	t.Parallel()
	bin := cliBinary(t)
	pb := writeFile(t, "slow.yaml", shellPlaybook("sleep 2"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", pb, "--eventlog", "memory:", "--progress", "never")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// The id is printed once the execution started, after the CLI set
	// up its signal handling: SIGINT from then on interrupts the wait.
	id, rest := startRun(t, cmd)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_, _ = rest.WriteTo(&bytes.Buffer{})
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit %v, want %d\nstderr %s", err, exitInterrupted, stderr.String())
	}
	msg := stderr.String()
	if strings.Contains(msg, "resume with") || strings.Contains(msg, "--eventlog memory:") ||
		!strings.Contains(msg, id+" cannot be resumed") || !strings.Contains(msg, "--eventlog sqlite:PATH or postgres://") {
		t.Fatalf("stderr %q: want that the in-memory log is gone and a log to use instead", msg)
	}
}

// TestCredentialNeverEchoed: run refuses a --credential value without an
// alias, or a URL whose query holds '=' and no alias before it, saying
// what form it wants, and prints no part of the value.
func TestCredentialNeverEchoed(t *testing.T) {
	t.Parallel()
	pb := writeFile(t, "echo.yaml", shellPlaybook("true"))
	for _, value := range []string{"postgres://app:pw@db/app", "postgres://u:pw@h/db?sslmode=disable"} {
		code, out, errOut := cli("run", pb, "--credential", value, "--eventlog", "memory:", "--progress", "never")
		if code != exitUsage || !strings.Contains(errOut, "want alias=URL") || strings.Contains(out+errOut, "pw") || strings.Contains(out+errOut, "postgres") {
			t.Errorf("--credential %q: exit %d\nstdout %s\nstderr %s", value, code, out, errOut)
		}
	}
}
