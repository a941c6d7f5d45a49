package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestResumeAfterKillDuringHungBody: a `cursorflow run` killed (SIGKILL)
// while a row's postgres body hangs, holding that row's lock, is finished
// by `cursorflow resume`. PostgreSQL used to run the killed process's
// statement on to its end (an hour here) with the row locked, so the
// resumed frame's body, then its release, waited on the lock: resume
// failed after 30 s ("release: timeout") with the row left claimed in the
// source. The tool's connections now have the server check for a client
// that is gone, so the orphaned statement ends and its lock with it.
func TestResumeAfterKillDuringHungBody(t *testing.T) {
	bin := cliBinary(t)
	dsn := testenv.PostgresSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	// The statement's text names the schema, so the cleanup ends only this
	// test's orphans (without the fix they would sleep for an hour and
	// hold the lock the schema's DROP needs).
	marker := "hang_" + schema
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND query LIKE '%' || $1 || '%'`, marker)
	})
	if _, err := conn.Exec(ctx, `CREATE TABLE q (id int PRIMARY KEY, status text NOT NULL DEFAULT 'pending',
			attempts int NOT NULL DEFAULT 0, note text);
		INSERT INTO q (id) SELECT generate_series(1, 20)`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pb := filepath.Join(dir, "drain.yaml")
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: killhang}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          WITH c AS (SELECT id FROM q WHERE status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
          UPDATE q SET status = 'claimed', attempts = q.attempts + 1 FROM c WHERE q.id = c.id RETURNING q.id, q.attempts
        ack: UPDATE q SET status = 'done' WHERE id IN ({{ keys | join(',') }})
        release: UPDATE q SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(',') }})
        dead_letter: UPDATE q SET status = 'dead' WHERE id IN ({{ keys | join(',') }})
      iterator: job
      spec: {mode: cursor, max_in_flight: 2, frame: {max_rows: 5, max_attempts: 2}}
    spec: {timeout: 2}
    tool:
      kind: postgres
      auth: pg
      command: "UPDATE q SET note = 'running' WHERE id = {{ iter.job.id }}; SELECT pg_sleep(CASE WHEN {{ iter.job.id }} = 7 THEN 3600 ELSE 0 END) AS ` + marker + `"
`
	if err := os.WriteFile(pb, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	logURL := "sqlite:" + filepath.Join(dir, "events.db")
	run := exec.Command(bin, "run", pb, "--credential", "pg="+dsn, "--eventlog", logURL, "--progress", "never")
	id, _ := startRun(t, run)
	// Kill while row 7's body sleeps, its UPDATE holding the row's lock.
	hung := `SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND wait_event = 'PgSleep'
		AND query LIKE '%' || $1 || '%'`
	for n := 0; n == 0; {
		if err := conn.QueryRow(ctx, hung, marker).Scan(&n); err != nil {
			_ = run.Process.Kill()
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			_ = run.Process.Kill()
			t.Fatal("row 7's body never started")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := run.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = run.Wait()

	rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer rcancel()
	out, err := exec.CommandContext(rctx, bin, "resume", id, "--credential", "pg="+dsn, "--eventlog", logURL, "--json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"status":"completed"`) {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	rows, err := conn.Query(ctx, `SELECT status, count(*), min(id) FROM q GROUP BY status ORDER BY status`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int{}
	for rows.Next() {
		var s string
		var n, first int
		if err := rows.Scan(&s, &n, &first); err != nil {
			t.Fatal(err)
		}
		got[s] = [2]int{n, first}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Row 7 hangs on every run: it fails (spec.timeout) until it is set
	// aside; every other row is done, and none is left claimed.
	if want := map[string][2]int{"done": {19, 1}, "dead": {1, 7}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows by status (count, first id) = %v, want %v\n%s", got, want, out)
	}
}
