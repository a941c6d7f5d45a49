package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/clirun"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// credPlaybook writes to side, sleeps, then reads PostgreSQL through the
// keychain alias orders_db (its auth key at line 11, column 7).
func credPlaybook(t *testing.T, side string) string {
	return writeFile(t, "orders.yaml", `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: orders}
workflow:
  - step: start
    tool: {kind: shell, command: "echo start >> `+side+`; sleep 3"}
    next: [db]
  - step: db
    tool:
      kind: postgres
      auth: orders_db
      command: SELECT 1 AS one
`)
}

// TestMissingCredentialIsRefusedUpFront: a playbook naming a credential
// alias the keychain lacks is refused before anything runs (exit 2, the
// alias and where it is written), by run and by resume alike; a resume
// refused so leaves the execution as it was, and resumes once the
// credential is given. It used to run the steps before the one that
// needs it and then fail the execution for good.
func TestMissingCredentialIsRefusedUpFront(t *testing.T) {
	dsn := testenv.Postgres(t)
	dir := t.TempDir()
	side := filepath.Join(dir, "side.txt")
	file := credPlaybook(t, side)
	logPath := filepath.Join(dir, "events.db")

	code, out, errOut := cli("run", file, "--eventlog", "sqlite:"+logPath)
	if code != exitUsage || !strings.Contains(errOut, file+":11:7") || !strings.Contains(errOut, `credential alias "orders_db" is not in the keychain`) {
		t.Fatalf("run without the credential: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if _, err := os.Stat(side); !os.IsNotExist(err) {
		t.Fatalf("a step ran before the refusal (%v)", err)
	}

	// Killed in its first step, the execution is resumed without the
	// credential, then with it.
	run := exec.Command(cliBinary(t), "run", file, "--eventlog", "sqlite:"+logPath, "--credential", "orders_db="+dsn)
	id, _ := startRun(t, run)
	killWhen(t, run, side, "start", 1, 30*time.Second)
	code, out, errOut = cli("resume", id, "--eventlog", "sqlite:"+logPath)
	if code != exitUsage || !strings.Contains(errOut, `"orders_db"`) {
		t.Fatalf("resume without the credential: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ev := range clirun.Recorded(t, ctx, logPath, id) {
		if ev.Type == eventlog.TypeExecutionFailed {
			t.Fatalf("the refused resume failed the execution: %s", ev.Payload)
		}
	}
	code, out, errOut = cli("resume", id, "--eventlog", "sqlite:"+logPath, "--credential", "orders_db="+dsn, "--json")
	var sum map[string]any
	if err := json.Unmarshal([]byte(out), &sum); code != exitOK || err != nil || sum["status"] != "completed" {
		// With --json, stdout is the summary alone (the id goes to stderr).
		t.Fatalf("resume with the credential: exit %d (%v)\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	if !strings.Contains(errOut, "execution "+id+"\n") {
		t.Errorf("--json: stderr %q lacks the execution id", errOut)
	}
}
