package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/cursorflow/cursorflow/engine"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

func TestProgressRender(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	st := &engine.Status{
		Playbook: "drain", Status: engine.StatusRunning, Events: 123456, StartedAt: now.Add(-90 * time.Second),
		InFlight: []string{"a@1", "b@1", "c@1"},
		Steps:    map[string]string{"start": "running", "fetch": "running", "prepare": "completed", "items": "running"},
		Loops: map[string]engine.LoopStatus{
			"start#1": {Step: "start", Mode: "cursor", Frames: 9, InFlight: 2, Rows: 1234571, OK: 1234567, Failed: 3, Dead: 1,
				Rate: 1234.4, StartedAt: now.Add(-65 * time.Second)},
			"items#1": {Step: "items", Mode: "parallel", Items: 20, Done: 5, InFlight: 3, Rate: 2.5, StartedAt: now.Add(-2 * time.Second)},
			"old#1":   {Step: "old", Mode: "cursor", OK: 10, Finished: true},
			// Drained after a lost attempt: waits for the source to take
			// back what that attempt may hold.
			"zhold#1": {Step: "zhold", Mode: "cursor", OK: 40, Rate: 10, StartedAt: now.Add(-4 * time.Second), HoldUntil: now.Add(42400 * time.Millisecond)},
			// A hold that is over says nothing.
			"zpast#1": {Step: "zpast", Mode: "cursor", OK: 7, Rate: 7, StartedAt: now.Add(-time.Second), HoldUntil: now.Add(-time.Second)},
		},
	}
	p := &progress{now: func() time.Time { return now }}
	want := []string{
		"drain running · 1m30s · 123,456 events · 3 in flight",
		"  items#1  [#####---------------] 5/20 items · 2.5 items/s · 3 in flight · 2s",
		"  start#1  rows 1,234,567 done · 3 failed · 1 dead · 1,234 rows/s · 2 frames in flight · 1m5s",
		"  zhold#1  rows 40 done · 0 failed · 0 dead · 10.0 rows/s · 0 frames in flight · 4s · held 42s more for rows a lost claim may hold",
		"  zpast#1  rows 7 done · 0 failed · 0 dead · 7.0 rows/s · 0 frames in flight · 1s",
		"  running: fetch",
	}
	if got := p.render(st); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("render:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestHoldNotices: without a progress drawing, a loop held after a lost
// frame attempt is said once per hold, with its time; a hold already over,
// a finished loop and a loop without a hold say nothing.
func TestHoldNotices(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	until := now.Add(42400 * time.Millisecond)
	st := &engine.Status{Loops: map[string]engine.LoopStatus{
		"held#1": {Step: "held", Mode: "cursor", HoldUntil: until},
		"over#1": {Step: "over", Mode: "cursor", HoldUntil: now.Add(-time.Second)},
		"done#1": {Step: "done", Mode: "cursor", HoldUntil: until, Finished: true},
		"none#1": {Step: "none", Mode: "cursor"},
	}}
	said := map[string]time.Time{}
	got := holdNotices(st, said, now)
	want := "cursorflow: loop held#1 lost a frame attempt: it does not end before " + until.Local().Format(time.TimeOnly) +
		" (in 42s), when the source has taken back the rows that attempt may hold"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("notices %q, want [%q]", got, want)
	}
	if again := holdNotices(st, said, now.Add(2*time.Second)); len(again) != 0 {
		t.Fatalf("the same hold said again: %q", again)
	}
	// A later loss moves the hold: said again.
	later := st.Loops["held#1"]
	later.HoldUntil = until.Add(30 * time.Second)
	st.Loops["held#1"] = later
	if moved := holdNotices(st, said, now.Add(4*time.Second)); len(moved) != 1 || !strings.Contains(moved[0], "(in 1m8s)") {
		t.Fatalf("a moved hold: %q, want one notice in 1m8s", moved)
	}
}

// TestProgressRedrawsInPlace: each draw erases the lines of the last one
// (cursor up, clear to the end of the screen), lines are cut to the
// terminal's width so that none wraps, and clear leaves nothing behind.
func TestProgressRedrawsInPlace(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	p := &progress{w: &out, width: 40, now: func() time.Time { return now }}
	st := &engine.Status{Playbook: "drain", Status: engine.StatusRunning, StartedAt: now,
		Loops: map[string]engine.LoopStatus{"start#1": {Step: "start", Mode: "cursor", OK: 5}}}
	p.draw(st)
	first := out.String()
	if strings.Contains(first, "\x1b[") || strings.Count(first, "\n") != 2 {
		t.Fatalf("first draw %q", first)
	}
	for _, line := range strings.Split(strings.TrimSuffix(first, "\n"), "\n") {
		if n := len([]rune(line)); n >= 40 {
			t.Errorf("line of %d columns on a 40-column terminal: %q", n, line)
		}
	}
	out.Reset()
	p.draw(st)
	if !strings.HasPrefix(out.String(), "\x1b[2A\x1b[J") {
		t.Fatalf("second draw does not erase the first: %q", out.String())
	}
	out.Reset()
	p.clear()
	if out.String() != "\x1b[2A\x1b[J" {
		t.Fatalf("clear wrote %q", out.String())
	}
	out.Reset()
	p.clear()
	if out.Len() != 0 {
		t.Fatalf("a second clear wrote %q", out.String())
	}
}

func TestWantProgress(t *testing.T) {
	t.Parallel()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		name string
		mode string
		json bool
		w    io.Writer
		want bool
	}{
		{"auto on a terminal", progressAuto, false, tty, true},
		{"auto on a pipe", progressAuto, false, w, false},
		{"auto on a buffer", progressAuto, false, &bytes.Buffer{}, false},
		{"auto with --json", progressAuto, true, tty, false},
		{"never on a terminal", progressNever, false, tty, false},
		{"always on a pipe", progressAlways, false, w, true},
		{"always with --json", progressAlways, true, w, false},
	} {
		if got := wantProgress(tc.mode, tc.json, tc.w); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// progressPlaybook's loop waits until {{ flag }} exists, so the test
// decides when it ends.
const progressPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: waits}
workload: {flag: /nonexistent}
workflow:
  - step: start
    loop:
      in: '{{ range(4) | list }}'
      iterator: i
      spec: {mode: parallel, max_in_flight: 2}
    tool: {kind: shell, command: "while [ ! -e {{ flag }} ]; do sleep 0.05; done"}
`

// TestRunShowsProgressOnATerminal runs the real binary as a user does: in
// a terminal (a pseudo-terminal here) `cursorflow run` draws the running
// loop's progress and erases it before the summary; with its output
// going to a pipe it draws nothing.
func TestRunShowsProgressOnATerminal(t *testing.T) {
	bin := cliBinary(t)
	dir := t.TempDir()
	pb := filepath.Join(dir, "waits.yaml")
	if err := os.WriteFile(pb, []byte(progressPlaybook), 0o644); err != nil {
		t.Fatal(err)
	}

	flagFile := filepath.Join(dir, "go-on")
	cmd := exec.Command(bin, "run", pb, "--eventlog", "sqlite:"+filepath.Join(dir, "events.db"), "--set", "flag="+flagFile)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	var (
		mu     sync.Mutex
		output strings.Builder
	)
	sawProgress := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		br := bufio.NewReader(ptmx)
		once := sync.Once{}
		for {
			line, err := br.ReadString('\n')
			mu.Lock()
			output.WriteString(line)
			mu.Unlock()
			if strings.Contains(line, "/4 items") && strings.Contains(line, "items/s") {
				once.Do(func() { close(sawProgress) })
			}
			if err != nil {
				return // EIO once the process exited
			}
		}
	}()
	select {
	case <-sawProgress:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		_ = cmd.Process.Kill()
		t.Fatalf("no progress line within 60s; output so far:\n%q", output.String())
	}
	if err := os.WriteFile(flagFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
	<-readDone
	out := output.String()
	if !strings.Contains(out, "waits running") || !strings.Contains(out, "start#1  [") {
		t.Errorf("no execution or loop line in the terminal output:\n%q", out)
	}
	if !strings.Contains(out, "\x1b[J") {
		t.Errorf("the progress was never erased:\n%q", out)
	}
	end := out[strings.LastIndex(out, "\x1b[J")+len("\x1b[J"):]
	if !strings.Contains(end, "completed in ") || strings.Contains(end, "items/s") {
		t.Errorf("after the progress is erased, want only the summary:\n%q", end)
	}

	// Not a terminal: no progress, no escape codes.
	flagFile2 := filepath.Join(dir, "already-there")
	if err := os.WriteFile(flagFile2, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	piped := exec.Command(bin, "run", pb, "--eventlog", "sqlite:"+filepath.Join(dir, "events.db"), "--set", "flag="+flagFile2)
	var stdout, stderr bytes.Buffer
	piped.Stdout, piped.Stderr = &stdout, &stderr
	if err := piped.Run(); err != nil {
		var ee *exec.ExitError
		errors.As(err, &ee)
		t.Fatalf("piped run: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), "\x1b") || strings.Contains(stderr.String(), "items/s") {
		t.Errorf("progress drawn on a pipe:\nstdout %q\nstderr %q", stdout.String(), stderr.String())
	}
}

// TestRunRemoteShowsProgress: `run --server` draws the server's view of
// the execution (forced with --progress always, output to a buffer) while
// it follows the events, and erases it before the summary.
func TestRunRemoteShowsProgress(t *testing.T) {
	t.Parallel()
	r := startRemote(t)
	file := writeFile(t, "gated.yaml", gatedRemotePlaybook)
	var stdout bytes.Buffer
	stderr := &testenv.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- dispatch([]string{"run", file, "--server", r.URL(), "--token", remoteToken, "--progress", "always"}, &stdout, stderr)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "gated running") {
		if time.Now().After(deadline) {
			t.Fatalf("no progress drawn within 30s: %q", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(r.Gate)
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "running: start") || !strings.HasSuffix(stderr.String(), "\x1b[J") {
		t.Errorf("stderr %q: want the running step, then the drawing erased", stderr.String())
	}
	if !strings.Contains(stdout.String(), "completed in ") {
		t.Errorf("stdout %q", stdout.String())
	}
	code, _, errOut := cli("run", file, "--server", r.URL(), "--progress", "sometimes")
	if code != exitUsage || !strings.Contains(errOut, "--progress") {
		t.Errorf("bad --progress: exit %d, %q", code, errOut)
	}
}
