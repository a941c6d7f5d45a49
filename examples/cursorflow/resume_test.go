package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/internal/clirun"
)

// TestKillAndResume runs a playbook in a real `cursorflow run` process,
// kills it with SIGKILL mid-execution, and completes the execution with
// `cursorflow resume`. Items the log recorded as completed before the kill
// must not run again.
func TestKillAndResume(t *testing.T) {
	bin := cliBinary(t)
	dir := t.TempDir()
	side := filepath.Join(dir, "side.txt")
	pb := filepath.Join(dir, "flow.yaml")
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: killme}
workload:
  side: ` + side + `
workflow:
  - step: start
    tool: {kind: shell, command: "echo start >> {{ side }}"}
    next: [items]
  - step: items
    loop:
      in: '{{ range(12) | list }}'
      iterator: i
      spec: {mode: sequential}
    tool: {kind: shell, command: "sleep 0.15; echo item-{{ iter.i }} >> {{ side }}"}
    next:
      - step: end
        when: '{{ event.name == "loop.done" }}'
  - step: end
    tool: {kind: shell, command: "echo end >> {{ side }}"}
`
	if err := os.WriteFile(pb, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "events.db")
	run := exec.Command(bin, "run", pb, "--eventlog", "sqlite:"+logPath)
	id, _ := startRun(t, run)
	// Kill once a few items are on record.
	killWhen(t, run, side, "item-", 4, 30*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var completedBefore []string
	for _, n := range completedBases(clirun.Recorded(t, ctx, logPath, id), "items", "/i") {
		completedBefore = append(completedBefore, "item-"+n)
	}
	if len(completedBefore) == 0 {
		t.Fatal("the killed run recorded no completed item")
	}

	out, err := exec.CommandContext(ctx, bin, "resume", id, "--eventlog", "sqlite:"+logPath, "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"status":"completed"`) {
		t.Fatalf("resume output: %s", out)
	}
	b, _ := os.ReadFile(side)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	counts := map[string]int{}
	for _, l := range lines {
		counts[l]++
	}
	if counts["start"] != 1 || counts["end"] != 1 {
		t.Fatalf("start ran %d times, end %d times; want 1 each\n%s", counts["start"], counts["end"], b)
	}
	for i := 0; i < 12; i++ {
		key := "item-" + strconv.Itoa(i)
		if counts[key] < 1 {
			t.Fatalf("%s never ran\n%s", key, b)
		}
	}
	for _, key := range completedBefore {
		if counts[key] != 1 {
			t.Fatalf("%s completed before the kill but ran %d times", key, counts[key])
		}
	}
	t.Logf("killed after %d completed items; resumed to completion", len(completedBefore))
}

// TestResumeHint: the command an interrupted run prints can be pasted into
// a shell as it is. A URL with ? and & is one quoted word (unquoted, the
// shell cut it at &), its password is not printed, and each --credential
// the run was given is named with a placeholder instead of its URL, which
// may hold a secret (without them the pasted resume exited 2).
func TestResumeHint(t *testing.T) {
	got := resumeHint("ex-1", "postgres://u:hunter2@db:5432/log?sslmode=disable&x=1",
		[]string{"pg=postgres://u:hunter2@db/q", "api={\"url\":\"http://x\"}"})
	want := `cursorflow resume ex-1 --eventlog 'postgres://u:xxxxx@db:5432/log?sslmode=disable&x=1'` +
		` --credential 'pg=<its URL>' --credential 'api=<its URL>'`
	if got != want {
		t.Fatalf("hint\n%s\nwant\n%s", got, want)
	}
	if got := resumeHint("ex-2", "sqlite:/tmp/it's.db", nil); got != `cursorflow resume ex-2 --eventlog 'sqlite:/tmp/it'\''s.db'` {
		t.Fatalf("hint %s", got)
	}
}
