package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestInterruptedRunRecordsWhatItDid: a run interrupted (SIGINT) in the
// middle of a cursor loop lets its running frames finish and records
// them before it exits, so that rows another run drains meanwhile are
// not run again when the interrupted execution is resumed: every row runs
// exactly once across the three runs.
func TestInterruptedRunRecordsWhatItDid(t *testing.T) {
	t.Parallel()
	bin := cliBinary(t)
	dir := t.TempDir()
	queue, side := filepath.Join(dir, "queue.db"), filepath.Join(dir, "side.txt")
	db, err := sql.Open("sqlite", queue)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 60
	if _, err := db.Exec(fmt.Sprintf(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT NOT NULL DEFAULT 'pending');
		WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d) INSERT INTO jobs (id) SELECT i FROM s`, rows)); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	pb := filepath.Join(dir, "drain.yaml")
	if err := os.WriteFile(pb, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: interrupted}
workflow:
  - step: start
    loop:
      cursor:
        kind: sqlite
        auth: q
        claim: |
          UPDATE jobs SET status = 'claimed'
          WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }})
          RETURNING id
        ack: UPDATE jobs SET status = 'done' WHERE id IN ({{ keys | join(',') }})
        release: UPDATE jobs SET status = 'pending' WHERE id IN ({{ keys | join(',') }})
      iterator: job
      spec: {mode: cursor, max_in_flight: 2, frame: {max_rows: 10, process: row}}
    tool: {kind: shell, command: "sleep 0.05; echo row-{{ iter.job.id }}. >> `+side+`"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	logURL := "sqlite:" + filepath.Join(dir, "events.db")
	cred := "q=" + queue
	first := exec.Command(bin, "run", pb, "--eventlog", logURL, "--credential", cred)
	id, _ := startRun(t, first)
	signalWhen(t, first, os.Interrupt, side, "row-", 5, 60*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Another execution drains what the interrupted one left, then the
	// interrupted one is resumed: it finds nothing more to run.
	if out, err := exec.CommandContext(ctx, bin, "run", pb, "--eventlog", logURL, "--credential", cred).CombinedOutput(); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, bin, "resume", id, "--eventlog", logURL, "--credential", cred, "--json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"status":"completed"`) {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(side)
	for i := 1; i <= rows; i++ {
		if n := strings.Count(string(b), fmt.Sprintf("row-%d.", i)); n != 1 {
			t.Errorf("row %d ran %d times", i, n)
		}
	}
}
