package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuickstartDrainsThenHasNothingLeft runs the quickstart twice on the
// same directory, as a user would: the first run drains every job, the
// second finds nothing to do.
func TestQuickstartDrainsThenHasNothingLeft(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if code := run([]string{"-n", "1500", "-dir", dir, "-quiet"}, &out, &out); code != 0 {
		t.Fatalf("first run exited %d:\n%s", code, out.String())
	}
	first := out.String()
	for _, want := range []string{"1500 jobs, 1500 pending", "items           1500 (1500 ok, 0 failed, 0 dead-lettered)", "events per item", "event log"} {
		if !strings.Contains(first, want) {
			t.Fatalf("first run's output lacks %q:\n%s", want, first)
		}
	}
	out.Reset()
	if code := run([]string{"-dir", dir, "-quiet"}, &out, &out); code != 0 {
		t.Fatalf("second run exited %d:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "nothing left to do") {
		t.Fatalf("second run did not report an empty queue:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"-print"}, &out, &out); code != 0 || !strings.Contains(out.String(), "kind: sqlite") {
		t.Fatalf("-print exited %d:\n%s", code, out.String())
	}
}

// TestInterruptedQuickstartResumes: a quickstart interrupted in the
// middle of its drain records what its frames did, and the next run
// resumes that execution instead of starting another: every job ends
// done, none left claimed.
func TestInterruptedQuickstartResumes(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched := make(chan error, 1)
	go func() {
		// Interrupt once some jobs are done.
		db, err := sql.Open("sqlite", filepath.Join(dir, "queue.db")+"?_pragma=busy_timeout(10000)")
		if err != nil {
			watched <- err
			return
		}
		defer db.Close()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			var done int
			if db.QueryRow(`SELECT count(*) FROM jobs WHERE status = 'done'`).Scan(&done) == nil && done >= 200 {
				cancel()
				watched <- nil
				return
			}
			time.Sleep(10 * time.Millisecond) // polling the queue with a deadline
		}
		watched <- errors.New("no job done within a minute")
	}()
	var out bytes.Buffer
	err := quickstart(ctx, 20000, dir, false, &out)
	if werr := <-watched; werr != nil {
		t.Fatal(werr)
	}
	if err == nil || !strings.Contains(err.Error(), "run the quickstart again to resume execution") {
		t.Fatalf("interrupted run: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := quickstart(context.Background(), 20000, dir, false, &out); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "resumed where an earlier run stopped") {
		t.Fatalf("the second run did not resume:\n%s", out.String())
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var notDone int
	if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE status <> 'done'`).Scan(&notDone); err != nil {
		t.Fatal(err)
	}
	if notDone != 0 {
		t.Fatalf("%d jobs not done after the resume", notDone)
	}
}
