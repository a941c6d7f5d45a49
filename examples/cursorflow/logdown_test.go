package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunWithTheEventLogDown: a run whose event log cannot be reached
// fails (exit 1) naming the log's problem, without the log's password;
// exit 2 is kept for a bad command line, which a script reads as a
// playbook or flag to fix rather than a database to wait for. A log URL
// of no backend is still a usage error.
func TestRunWithTheEventLogDown(t *testing.T) {
	t.Parallel()
	pb := filepath.Join(t.TempDir(), "flow.yaml")
	if err := os.WriteFile(pb, []byte("workflow:\n  - step: start\n    tool: {kind: noop}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Port 1 on the loopback: nothing listens, the connection is refused.
	code, _, errOut := cli("run", pb, "--eventlog", "postgres://cf:hunter2-secret@127.0.0.1:1/db?sslmode=disable&connect_timeout=5")
	if code != exitInvalid || !strings.Contains(errOut, "event log") || strings.Contains(errOut, "hunter2-secret") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, errOut := cli("run", pb, "--eventlog", "mysql://127.0.0.1/db"); code != exitUsage {
		t.Fatalf("unsupported log URL: exit %d: %s", code, errOut)
	}
}
