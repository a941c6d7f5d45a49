package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// orphanParent is a parent whose branch bad fails once its sub-playbook
// child (see writeChildren) has started, leaving the child running.
const orphanParent = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: orphan}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      spec: {mode: inclusive}
      arcs: [{step: sub}, {step: bad}]
  - step: sub
    tool: {kind: playbook, path: ./child.yaml}
  - step: bad
    tool: {kind: shell, command: "while [ ! -e started ]; do sleep 0.05; done; exit 5"}
`

// writeChildren writes, in a directory of its own, child.yaml (a shell
// step that says it started, then sleeps a minute) and parent.yaml (the
// parent's source, "started" in it naming the child's mark), and returns
// the parent's path. The child says it started, so that a failing branch
// fails only once there is a child to leave behind.
func writeChildren(t *testing.T, parent string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	started := filepath.Join(dir, "started")
	write("child.yaml", shellPlaybook("touch "+started+"; sleep 60"))
	return write("parent.yaml", strings.ReplaceAll(parent, "started", started))
}

// TestRunSettlesChildren: a run whose execution ends while a sub-playbook
// child still runs (a parallel branch failed; a step's spec.timeout ran
// out) leaves the child cancelled in the log, not running. Before, the
// run closed its engine as soon as the parent ended, before the child's
// cancellation was carried out (or even recorded): the log showed the
// child running for good, and a resume of it ran its work to the end,
// for a parent that had long failed.
func TestRunSettlesChildren(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, playbook, child string }{
		{"orphaned by a failed branch", orphanParent, "/sub#1"},
		{"cancelled by the step's timeout", `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: timeout}
workflow:
  - step: start
    spec: {timeout: 3}
    tool: {kind: playbook, path: ./child.yaml}
`, "/start#1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pb := writeChildren(t, tt.playbook)
			logURL := "sqlite:" + filepath.Join(t.TempDir(), "events.db")
			code, out, errOut := cli("run", pb, "--eventlog", logURL, "--progress", "never")
			if code != exitInvalid {
				t.Fatalf("run: exit %d\nstdout %s\nstderr %s", code, out, errOut)
			}
			child := executionID(t, out) + tt.child
			code, out, errOut = cli("status", child, "--eventlog", logURL)
			if code != exitOK || !strings.Contains(out, `"status": "cancelled"`) {
				t.Fatalf("child %s: exit %d\nstdout %s\nstderr %s", child, code, out, errOut)
			}
		})
	}
}

// TestEventsShowContinuedFailure: `events` prints the error of an item
// whose tool failed and whose policy rule continued the loop: its command
// is recorded as completed, and the line said nothing of the failure.
func TestEventsShowContinuedFailure(t *testing.T) {
	t.Parallel()
	pb := writeFile(t, "loop.yaml", `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: loop}
workflow:
  - step: start
    loop:
      in: [1, 2]
      iterator: it
      spec:
        policy:
          rules:
            - when: "{{ output.status == 'error' }}"
              then: {do: continue}
    tool: {kind: shell, command: "test {{ it }} -ne 2"}
`)
	logURL := "sqlite:" + filepath.Join(t.TempDir(), "events.db")
	code, out, errOut := cli("run", pb, "--eventlog", logURL, "--progress", "never")
	if code != exitOK {
		t.Fatalf("run: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	id := executionID(t, out)
	code, out, errOut = cli("events", id, "--eventlog", logURL)
	if code != exitOK {
		t.Fatalf("events: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "command.completed") && strings.Contains(line, "/i1@1") {
			if !strings.Contains(line, `error="shell: exit status 1"`) {
				t.Fatalf("line %q: want the item's error", line)
			}
			return
		}
	}
	t.Fatalf("no command.completed of item 1 in\n%s", out)
}

// TestResumeCancelsAStrandedChild: a run's process died after its
// execution ended and before the child it left running was cancelled
// (here: the child's cancel taken out of the log). resume of the ended
// execution cancels the child, which this process does not drive, by
// resuming it. Before, settleChildren's cancel found it unknown, waited
// out its grace and left it running.
func TestResumeCancelsAStrandedChild(t *testing.T) {
	t.Parallel()
	pb := writeChildren(t, orphanParent)
	dbPath := filepath.Join(t.TempDir(), "events.db")
	logURL := "sqlite:" + dbPath
	code, out, errOut := cli("run", pb, "--eventlog", logURL, "--progress", "never")
	if code != exitInvalid {
		t.Fatalf("run: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	id := executionID(t, out)
	child := id + "/sub#1"
	// Strand the child: the log as a process that died before the cancel
	// left it.
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var cancelSeq int64
	if err := db.QueryRow(`SELECT seq FROM events WHERE execution_id = ? AND type = 'cancel.requested'`, child).Scan(&cancelSeq); err != nil {
		t.Fatalf("the run left no cancel of its child: %v", err)
	}
	if _, err := db.Exec(`DELETE FROM events WHERE execution_id = ? AND seq >= ?`, child, cancelSeq); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE executions SET last_seq = ?, terminal = NULL, finished_at = NULL WHERE execution_id = ?`, cancelSeq-1, child); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli("status", child, "--eventlog", logURL); code != exitOK || !strings.Contains(out, `"status": "running"`) {
		t.Fatalf("stranded child: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if code, out, errOut := cli("resume", id, "--eventlog", logURL, "--progress", "never"); code != exitInvalid || strings.Contains(errOut, "unfinished") {
		t.Fatalf("resume: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if code, out, errOut := cli("status", child, "--eventlog", logURL); code != exitOK || !strings.Contains(out, `"status": "cancelled"`) {
		t.Fatalf("child after the resume: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}
