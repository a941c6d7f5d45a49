package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// handBackPlaybook drains table with the natural claim (no attempts column
// returned) and a release statement, so that failed rows go back to the
// queue, as a user writes it to let cancels hand rows back. returning is
// the claim's RETURNING list, cursorExtra more cursor statements; body
// fails for row 7 (process: row) or for the frame holding it (frame).
func handBackPlaybook(table, returning, cursorExtra, process string) string {
	body := `SELECT CASE WHEN {{ iter.job.id }} = 7 THEN 1/0 END; UPDATE ` + table + ` SET status = 'done', done_count = done_count + 1 WHERE id = {{ iter.job.id }}`
	if process == "frame" {
		body = `SELECT CASE WHEN {{ iter.job | map(attribute='id') | list | tojson | sql_literal }}::jsonb @> '7' THEN 1/0 END; ` +
			`UPDATE ` + table + ` q SET status = 'done', done_count = q.done_count + 1 FROM jsonb_to_recordset({{ iter.job | tojson | sql_literal }}::jsonb) AS r(id int) WHERE q.id = r.id`
	}
	return header + fmt.Sprintf(`workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          WITH c AS (SELECT id FROM %[1]s WHERE status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
          UPDATE %[1]s q SET status = 'claimed', attempts = q.attempts + 1 FROM c WHERE q.id = c.id RETURNING %[2]s
        release: UPDATE %[1]s SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(',') }})%[3]s
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 4
        frame: {max_rows: 20, process: %[4]s}
    tool:
      kind: postgres
      auth: pg
      command: %[5]q
`, table, returning, cursorExtra, process, body)
}

// TestRowFailingForeverStopsTheLoop: a row whose body always fails, in a
// loop whose source hands failed rows back but does not count their
// deliveries, used to be claimed and failed again forever, each time as a
// first attempt. The loop now stops once the row has failed more often
// than max_attempts (3 by default): the step fails naming the row and
// the fix, nothing stays claimed, and row 7 never ran to completion.
func TestRowFailingForeverStopsTheLoop(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	for _, process := range []string{"row", "frame"} {
		t.Run(process, func(t *testing.T) {
			t.Parallel()
			pool, table := pgQueue(t, dsn, 200)
			e, log := cursorEngine(t, dsn)
			sum, evs := runPlaybook(t, e, log, handBackPlaybook(table, "q.id, q.payload", "", process), engine.StartOptions{}, time.Minute)
			t.Cleanup(func() { dumpOnFail(t, evs) })
			// Process frame: every row of row 7's frame fails with it, and
			// whichever crosses the limit first is named.
			want := "row 7 failed 4 times, more than max_attempts (3)"
			if process == "frame" {
				want = " failed 4 times, more than max_attempts (3)"
			}
			if sum.Status != engine.StatusFailed || sum.Step != "start" || sum.Field != "loop" ||
				!strings.Contains(sum.Error, want) || !strings.Contains(sum.Error, "division by zero") {
				t.Fatalf("summary %+v: want the loop stopped on a row of %q", sum, want)
			}
			frames := 0
			for _, ev := range evs {
				if ev.Type == eventlog.TypeFrameDone {
					frames++
				}
			}
			// 200 rows in frames of 20, plus row 7's (or its frame's) three
			// more tries, one per slot at most in flight meanwhile.
			if frames > 40 {
				t.Errorf("%d frames ran: the failing row went round more than max_attempts", frames)
			}
			var claimed, done7 int
			var status7 string
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'claimed'),
				max(done_count) FILTER (WHERE id = 7), max(status) FILTER (WHERE id = 7) FROM `+table).Scan(&claimed, &done7, &status7); err != nil {
				t.Fatal(err)
			}
			if claimed != 0 || done7 != 0 || status7 != "pending" {
				t.Fatalf("%d rows left claimed; row 7 %s, done %d times: want none claimed and row 7 pending, never done", claimed, status7, done7)
			}
		})
	}
}

// drainWithDeadLetter drains table with handBackPlaybook (row 7 always
// fails), a claim that returns the source's attempts and a dead_letter
// statement, and wants the execution completed; it returns its events.
func drainWithDeadLetter(t *testing.T, dsn, table string) (*engine.Summary, []eventlog.Event) {
	t.Helper()
	e, log := cursorEngine(t, dsn)
	deadLetter := "\n        dead_letter: UPDATE " + table + " SET status = 'dead' WHERE id IN ({{ keys | join(',') }})"
	sum, evs := runPlaybook(t, e, log, handBackPlaybook(table, "q.id, q.payload, q.attempts", deadLetter, "row"), engine.StartOptions{}, time.Minute)
	t.Cleanup(func() { dumpOnFail(t, evs) })
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("summary %+v: want completed", sum)
	}
	return sum, evs
}

// TestRowSetAsideByTheSourceGoesOn: with a claim that returns attempts and
// a dead_letter statement, the source sets row 7 aside after max_attempts
// and the loop drains the rest: the engine's own count does not stop it.
func TestRowSetAsideByTheSourceGoesOn(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	pool, table := pgQueue(t, dsn, 200)
	sum, evs := drainWithDeadLetter(t, dsn, table)
	var done, dead, other int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'dead' AND id = 7),
		count(*) FILTER (WHERE status NOT IN ('done', 'dead')) FROM `+table).Scan(&done, &dead, &other); err != nil {
		t.Fatal(err)
	}
	if done != 199 || dead != 1 || other != 0 {
		t.Fatalf("%d done, row 7 dead: %d, %d other: want 199 done and row 7 dead", done, dead, other)
	}
	// The loop's result counts the row the source set aside, as the
	// table does: set aside when claimed, it is reported by the frame
	// that claimed.
	data, _ := sum.Results["start"].(map[string]any)["data"].(map[string]any)
	if fmt.Sprint(data["dead"]) != "1" || fmt.Sprint(data["ok"]) != "199" {
		t.Fatalf("loop result %v: want 199 ok and 1 dead", data)
	}
	var deadItems int
	for _, ev := range evs {
		if ev.Type == eventlog.TypeFrameDone && strings.Contains(string(ev.Payload), `"key":"7","outcome":"dead"`) {
			deadItems++
		}
	}
	if deadItems != 1 {
		t.Fatalf("row 7 reported dead by %d frames, want 1", deadItems)
	}
}

// TestWaitReturnsOnceTheSourceSettled: a row that keeps failing is given
// up at its fourth delivery, and its claim, which holds no other row,
// records the row dead before it commits the source's dead letter. That
// record ends the loop and the execution, so Wait used to return while
// the commit had not happened yet: a caller reading the source after Wait
// saw the row still claimed. Here the commit is slow, as one waiting for
// a synchronous standby is (a deferred trigger sleeps in it). Wait now
// returns once this engine's worker has settled the claim.
func TestWaitReturnsOnceTheSourceSettled(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	pool, table := pgQueue(t, dsn, 40)
	if _, err := pool.Exec(context.Background(), fmt.Sprintf(`CREATE FUNCTION %[1]s_slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.5); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER slow_commit AFTER UPDATE ON %[1]s DEFERRABLE INITIALLY DEFERRED
		FOR EACH ROW WHEN (NEW.status = 'dead') EXECUTE FUNCTION %[1]s_slow()`, table)); err != nil {
		t.Fatal(err)
	}
	drainWithDeadLetter(t, dsn, table)
	var done int
	var status string
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'done'), max(status) FILTER (WHERE id = 7) FROM `+table).Scan(&done, &status); err != nil {
		t.Fatal(err)
	}
	if done != 39 || status != "dead" {
		t.Fatalf("after Wait: %d rows done, row 7 %q; want 39 done and row 7 dead", done, status)
	}
}

// TestRepeatedDeliveryCountsOnce: a source that numbers deliveries hands
// a failing row out twice under one number (as it does when a claim's
// commit is lost after the record: its mark rolled back). The failures
// count once per number, so the loop goes on until the source sets the
// row aside after max_attempts (3), and drains the rest. Before, the
// fourth failure stopped the loop ("row 7 failed 4 times, more than
// max_attempts (3)") with the source one claim away from setting it aside.
func TestRepeatedDeliveryCountsOnce(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	pool, table := pgQueue(t, dsn, 200)
	if _, err := pool.Exec(context.Background(), `ALTER TABLE `+table+` ADD COLUMN replayed bool NOT NULL DEFAULT false`); err != nil {
		t.Fatal(err)
	}
	e, log := cursorEngine(t, dsn)
	deadLetter := "\n        dead_letter: UPDATE " + table + " SET status = 'dead' WHERE id IN ({{ keys | join(',') }})"
	src := handBackPlaybook(table, "q.id, q.payload, q.attempts", deadLetter, "row")
	// Row 7's first delivery is handed out twice as number 1.
	const mark = "attempts = q.attempts + 1"
	if !strings.Contains(src, mark) {
		t.Fatalf("the claim has no %q", mark)
	}
	src = strings.Replace(src, mark, "attempts = q.attempts + CASE WHEN q.id = 7 AND q.attempts = 1 AND NOT q.replayed THEN 0 ELSE 1 END, "+
		"replayed = q.replayed OR (q.id = 7 AND q.attempts = 1)", 1)
	sum, evs := runPlaybook(t, e, log, src, engine.StartOptions{}, time.Minute)
	t.Cleanup(func() { dumpOnFail(t, evs) })
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("summary %+v: want completed", sum)
	}
	var done, dead, attempts int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'dead' AND id = 7),
		max(attempts) FILTER (WHERE id = 7) FROM `+table).Scan(&done, &dead, &attempts); err != nil {
		t.Fatal(err)
	}
	if done != 199 || dead != 1 || attempts != 4 {
		t.Fatalf("%d done, row 7 dead: %d after %d deliveries: want 199 done and row 7 dead at its 4th", done, dead, attempts)
	}
	// The same history recorded before semantics 7 folds as it was
	// decided then: row 7's fourth failure stops the loop.
	if l := foldBeforeLoopDone(t, evs, 6).Loops["start#1"]; l == nil || !strings.Contains(l.Fail, "row 7 failed 4 times, more than max_attempts (3)") {
		t.Fatalf("semantics 6 fold: loop %+v, want it stopped on row 7", l)
	}
}
