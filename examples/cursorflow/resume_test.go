package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	eventsqlite "github.com/cursorflow/cursorflow/eventlog/sqlite"
)

// TestKillAndResume runs a playbook in a real `cursorflow run` process,
// kills it with SIGKILL mid-execution, and completes the execution with
// `cursorflow resume`. Items the log recorded as completed before the kill
// must not run again.
func TestKillAndResume(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go toolchain not on PATH")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "cursorflow")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
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
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading execution id: %v", err)
	}
	id := strings.TrimSpace(strings.TrimPrefix(line, "execution "))

	// Kill once a few items are on record.
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(side)
		if strings.Count(string(b), "item-") >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress before kill; side effects: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := run.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = run.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	completedBefore := completedItems(t, ctx, logPath, id)
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

// completedItems lists item-N for each loop item the log recorded as
// completed.
func completedItems(t *testing.T, ctx context.Context, path, id string) []string {
	t.Helper()
	log, err := eventsqlite.Open(ctx, path, eventsqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandCompleted && ev.Step == "items" {
			// command ids are items#1/i<N>@<attempt>
			base := ev.CommandID[:strings.LastIndexByte(ev.CommandID, '@')]
			n := base[strings.LastIndex(base, "/i")+2:]
			keys = append(keys, "item-"+n)
		}
	}
	return keys
}
