package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/cursorflow/cursorflow/eventlog"
	sqlitelog "github.com/cursorflow/cursorflow/eventlog/sqlite"
)

// TestInterruptedRunRecordsWhatItDid: a run interrupted (SIGINT) in the
// middle of a cursor loop records what its running frames did before it
// exits, so that rows another run drains meanwhile are not run again when
// the interrupted execution is resumed: every row runs exactly once
// across the three runs. Interrupted once, the frames finish their rows;
// interrupted twice, they are cut short and hand back the rows they did
// not finish, and that is on record too.
func TestInterruptedRunRecordsWhatItDid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		twice bool
		sleep string // each row's run time
	}{
		{"once", false, "0.05"},
		{"twice", true, "0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			interruptedDrain(t, tc.twice, tc.sleep)
		})
	}
}

func interruptedDrain(t *testing.T, twice bool, sleep string) {
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
    tool: {kind: shell, command: "sleep `+sleep+` && echo row-{{ iter.job.id }}. >> `+side+`"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	logURL := "sqlite:" + filepath.Join(dir, "events.db")
	cred := "q=" + queue
	first := exec.Command(bin, "run", pb, "--eventlog", logURL, "--credential", cred)
	if !twice {
		id, _ := startRun(t, first)
		signalWhen(t, first, os.Interrupt, side, "row-", 5, 60*time.Second)
		_ = first.Wait()
		drainAndResume(t, bin, pb, logURL, cred, id, side, rows, false)
		return
	}
	stderr, err := first.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := startRun(t, first)
	// Interrupt once rows run, and again once the run said it took the
	// first interrupt: the rows still running are cut short.
	signalWhen(t, first, os.Interrupt, side, "row-", 2, 60*time.Second)
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "interrupted:") {
	}
	if err := first.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	// An interrupted run says so, and how to resume, in words and in its
	// exit status (not "context canceled" and a failed execution's 1).
	if code := exitStatus(first.Wait()); code != exitInterrupted || !strings.Contains(rest.String(), "interrupted; "+id+" is unfinished") ||
		!strings.Contains(rest.String(), "resume with: cursorflow resume "+id) {
		t.Fatalf("interrupted run: exit %d, stderr:\n%s", code, rest.String())
	}
	drainAndResume(t, bin, pb, logURL, cred, id, side, rows, true)
}

// drainAndResume drains what the interrupted execution id left with
// another run, resumes id (it finds nothing more to run) and checks that
// every row ran exactly once. With cut, rows the interrupted execution
// cut short and handed back (on record as not done) may have run twice: a
// shell killed after its echo but before it exited did its work, and
// nothing can know it (at least once). Every row it recorded done ran
// once.
func drainAndResume(t *testing.T, bin, pb, logURL, cred, id, side string, rows int, cut bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "run", pb, "--eventlog", logURL, "--credential", cred).CombinedOutput(); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, bin, "resume", id, "--eventlog", logURL, "--credential", cred, "--json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"status":"completed"`) {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	done := doneRows(t, strings.TrimPrefix(logURL, "sqlite:"), id)
	b, _ := os.ReadFile(side)
	for i := 1; i <= rows; i++ {
		n := strings.Count(string(b), fmt.Sprintf("row-%d.", i))
		switch {
		case n == 1:
		case n == 2 && cut && !done[strconv.Itoa(i)]:
			t.Logf("row %d, cut short after its echo and handed back, ran again", i)
		default:
			t.Errorf("row %d ran %d times (recorded done by the interrupted run: %v)", i, n, done[strconv.Itoa(i)])
		}
	}
}

// doneRows returns the keys of the rows execution id recorded done
// (outcome ok in its frame.done events), read from its SQLite log.
func doneRows(t *testing.T, path, id string) map[string]bool {
	t.Helper()
	log, err := sqlitelog.Open(t.Context(), path, sqlitelog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	done := map[string]bool{}
	var after int64
	for {
		evs, err := log.Read(t.Context(), id, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return done
		}
		after = evs[len(evs)-1].Seq
		for _, ev := range evs {
			if ev.Type != eventlog.TypeFrameDone {
				continue
			}
			var p struct {
				Items []struct{ Key, Outcome string } `json:"items"`
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatalf("frame.done %d: %v", ev.Seq, err)
			}
			for _, it := range p.Items {
				if it.Outcome == "ok" {
					done[it.Key] = true
				}
			}
		}
	}
}
