package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEventsFollowLocal: while `cursorflow run` runs a shell step that
// waits, `cursorflow events ID --eventlog ... --follow` in another process
// prints the step's output lines (call.partial) as they are recorded; the
// test lets the step finish only once it has read one, and events exits
// when the execution ends.
func TestEventsFollowLocal(t *testing.T) {
	bin := cliBinary(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	pb := filepath.Join(dir, "flow.yaml")
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: follow}
workload:
  gate: ` + gate + `
workflow:
  - step: start
    tool:
      kind: shell
      command: 'echo "halfway there"; while [ ! -e "{{ gate }}" ]; do sleep 0.02; done; echo done'
`
	if err := os.WriteFile(pb, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logURL := "sqlite:" + filepath.Join(dir, "events.db")
	run := exec.CommandContext(ctx, bin, "run", pb, "--eventlog", logURL)
	id, stdout := startRun(t, run)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	follow := exec.CommandContext(ctx, bin, "events", id, "--eventlog", logURL, "--follow")
	out, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	var printed []string
	sc := bufio.NewScanner(out)
	sawPartial := false
	for sc.Scan() {
		l := sc.Text()
		printed = append(printed, l)
		if strings.Contains(l, "call.partial") && strings.Contains(l, `halfway there`) && !sawPartial {
			sawPartial = true
			if strings.Contains(strings.Join(printed, "\n"), "command.completed") {
				t.Fatalf("the partial came after the completion:\n%s", strings.Join(printed, "\n"))
			}
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := follow.Wait(); err != nil {
		t.Fatalf("events --follow: %v\n%s", err, strings.Join(printed, "\n"))
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
	all := strings.Join(printed, "\n")
	if !sawPartial || !strings.Contains(all, `"line":"done"`) || !strings.Contains(all, "execution.completed") {
		t.Fatalf("events --follow printed:\n%s", all)
	}
}
