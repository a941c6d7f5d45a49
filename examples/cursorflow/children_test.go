package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
		{"orphaned by a failed branch", `apiVersion: noetl.io/v2
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
`, "/sub#1"},
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
			dir := t.TempDir()
			write := func(name, content string) string {
				path := filepath.Join(dir, name)
				if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				return path
			}
			// The child says it started, so that the failing branch fails
			// only once there is a child to leave behind.
			started := filepath.Join(dir, "started")
			write("child.yaml", shellPlaybook("touch "+started+"; sleep 60"))
			pb := write("parent.yaml", strings.ReplaceAll(tt.playbook, "started", started))
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
