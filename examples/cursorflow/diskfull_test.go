package main

import (
	"bufio"
	"bytes"
	"database/sql"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestResumeOnAFullDiskWaitsForSpace: the default event log's disk is
// full when a resume starts (the run that filled it was interrupted). The
// resume used to exit 1 at its first append with "engine: report not
// recorded now, send it again", which names no file and no resume
// command, while run waits out the same log. Now it says which log failed
// and why, waits, and completes the execution once space is freed, with
// the log intact.
func TestResumeOnAFullDiskWaitsForSpace(t *testing.T) {
	bin, env, id, side, filler, logPath := interruptedRunOnAFullDisk(t)
	var stdout bytes.Buffer
	resume, lines, said := waitingResume(t, bin, env, id, &stdout)
	if !strings.Contains(said, logPath) || !strings.Contains(said, "full") {
		_ = resume.Process.Kill()
		_ = resume.Wait()
		t.Fatalf("resume on a full disk said %q: want the log's path %s and the cause", said, logPath)
	}
	go func() {
		for lines.Scan() {
		}
	}()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- resume.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(stdout.String(), "completed") {
			t.Fatalf("resume once space is freed: %v: %s", err, stdout.String())
		}
	case <-time.After(60 * time.Second):
		_ = resume.Process.Kill()
		t.Fatalf("resume did not end within a minute of space freed: %s", stdout.String())
	}
	if b, _ := os.ReadFile(side); strings.Count(string(b), "end") != 1 {
		t.Fatalf("side effects %q: want the last step once", b)
	}
	db, err := sql.Open("sqlite", logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
}

// TestResumeInterruptedOnAFullDiskExitsInterrupted: a resume waiting out
// a full disk is interrupted (Ctrl-C) before space is freed. It is a
// resume stopped by SIGINT with its execution unfinished in the log, so it
// exits 130 with the resume command, as one interrupted mid-run does: it
// exited 1, the code of a resume that failed.
func TestResumeInterruptedOnAFullDiskExitsInterrupted(t *testing.T) {
	bin, env, id, _, _, _ := interruptedRunOnAFullDisk(t)
	resume, lines, _ := waitingResume(t, bin, env, id, nil)
	// The resume said it waits: interrupt it.
	if err := resume.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var said strings.Builder
	for lines.Scan() {
		said.WriteString(lines.Text() + "\n")
	}
	err := resume.Wait()
	if code := resume.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("resume interrupted while the log was full: exit %d (%v), want %d; said %q", code, err, exitInterrupted, said.String())
	}
	if !strings.Contains(said.String(), "cursorflow resume "+id) {
		t.Fatalf("resume interrupted while the log was full said %q: want the resume command", said.String())
	}
}

// waitingResume starts `resume id` of the CLI bin with env, its stdout to
// stdout (nil: discarded), and reads its stderr up to the first line it
// says ("cursorflow: ..."), which it returns with the scanner of the rest.
func waitingResume(t *testing.T, bin string, env []string, id string, stdout io.Writer) (*exec.Cmd, *bufio.Scanner, string) {
	t.Helper()
	resume := exec.Command(bin, "resume", id, "--progress", "never")
	resume.Env, resume.Stdout = env, stdout
	stderr, err := resume.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := resume.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if l := lines.Text(); strings.HasPrefix(l, "cursorflow: ") {
			return resume, lines, l
		}
	}
	return resume, lines, ""
}

// interruptedRunOnAFullDisk runs a playbook with the default event log on
// a 1 MB tmpfs, interrupts it after its first step and fills the disk but
// for the 32 KiB SQLite needs to open the log. It returns the CLI, its
// environment, the execution's id, the playbook's side-effect file, the
// file filling the disk and the log's path.
func interruptedRunOnAFullDisk(t *testing.T) (bin string, env []string, id, side, filler, logPath string) {
	t.Helper()
	state := testenv.SmallDisk(t, "1m")
	bin = cliBinary(t)
	dir := t.TempDir()

	side = filepath.Join(dir, "side.txt")
	pb := filepath.Join(dir, "flow.yaml")
	if err := os.WriteFile(pb, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fulldisk}
workflow:
  - step: start
    tool: {kind: shell, command: "echo start >> `+side+`"}
    next: [{step: second}]
  - step: second
    tool: {kind: shell, command: "sleep 1; echo second >> `+side+`"}
    next: [{step: end}]
  - step: end
    tool: {kind: shell, command: "echo end >> `+side+`"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env = append(os.Environ(), "XDG_STATE_HOME="+state)
	run := exec.Command(bin, "run", pb, "--progress", "never")
	run.Env = env
	id, _ = startRun(t, run)
	// Interrupted, the run records its running step before it exits: the
	// resume has no command of a dead process to wait out the lease of.
	signalWhen(t, run, os.Interrupt, side, "start", 1, 30*time.Second)
	_ = run.Wait()

	// Another file takes what is left of the disk but the 32 KiB SQLite
	// needs to open the log (its -shm file): the appends find it full.
	filler = filepath.Join(state, "filler")
	if err := os.Truncate(filler, testenv.FillDisk(t, filler)-32<<10); err != nil {
		t.Fatal(err)
	}

	return bin, env, id, side, filler, filepath.Join(state, "cursorflow", "events.db")
}
