package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInterruptedRunOnTheMemoryLog: ^C on a run with the in-memory log
// exits 130 as on any other log, so a script tells an interrupted run
// from a failed one; it exited 1 with "context canceled". It still says
// the execution cannot be resumed.
func TestInterruptedRunOnTheMemoryLog(t *testing.T) {
	t.Parallel()
	bin := cliBinary(t)
	dir := t.TempDir()
	side, pb := filepath.Join(dir, "side.txt"), filepath.Join(dir, "flow.yaml")
	if err := os.WriteFile(pb, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: memint}
workflow:
  - step: start
    tool: {kind: shell, command: "echo start >> `+side+`; sleep 1"}
    next: [{step: end}]
  - step: end
    tool: {kind: shell, command: "echo end >> `+side+`"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(bin, "run", pb, "--eventlog", "memory:", "--progress", "never")
	var stderr bytes.Buffer
	run.Stderr = &stderr
	startRun(t, run)
	signalWhen(t, run, os.Interrupt, side, "start", 1, 30*time.Second)
	if code := exitStatus(run.Wait()); code != exitInterrupted || !strings.Contains(stderr.String(), "cannot be resumed") {
		t.Fatalf("interrupted run on the memory log: exit %d, want %d; said %q", code, exitInterrupted, stderr.String())
	}
}
