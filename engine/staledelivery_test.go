package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestStaleDeliveryFailureAfterDeadLetter: a claim recorded and then rolled
// back (its process killed between frame.claimed and the commit) leaves
// the row pending in the source while the log holds it under delivery
// number 1. The resumed execution runs that frame again, and meanwhile
// later claims hand the row out as 1, 2, 3 and then set it aside (dead,
// max_attempts 3). When the re-run frame's failure of delivery 1 is
// reported last, the fold counts it as a new delivery (it compares a
// failure's number with the previous failure's only) and stops the loop
// ("row 7 failed 5 times, more than max_attempts (3)") although the source
// had already set the row aside: the execution fails, rows still pending
// are never claimed, and it cannot be resumed. Found with the CLI: a
// drain of 600 rows with 6 always-failing ones (max_attempts 5, the
// README's release and dead_letter statements), SIGKILLed at
// frame.recorded and then frame.ran, failed at its next resume in 2 of 4
// runs on mysql and 1 of 4 on sqlite.
//
// The fold now counts the distinct delivery numbers a row failed under
// (semanticsDeliverySet).
func TestStaleDeliveryFailureAfterDeadLetter(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	pool, table := pgQueue(t, dsn, 200)
	if _, err := pool.Exec(context.Background(), `ALTER TABLE `+table+` ADD COLUMN replayed bool NOT NULL DEFAULT false`); err != nil {
		t.Fatal(err)
	}
	e, log := cursorEngine(t, dsn)
	// Row 7's first claim is the one rolled back after its record: it is
	// returned as delivery 1 (first: true) but its mark does not stay,
	// so row 7 is still pending, attempts 0, for the next claim.
	claim := `UPDATE ` + table + ` q SET
            status = CASE WHEN q.id = 7 AND NOT q.replayed THEN 'pending' ELSE 'claimed' END,
            attempts = q.attempts + CASE WHEN q.id = 7 AND NOT q.replayed THEN 0 ELSE 1 END,
            replayed = q.replayed OR q.id = 7
          FROM (SELECT id FROM ` + table + ` WHERE status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }}) c
          WHERE q.id = c.id
          RETURNING q.id, q.payload, GREATEST(q.attempts, 1) AS attempts, (q.id = 7 AND q.attempts = 0) AS first`
	// The frame of the rolled-back claim (the re-issued one, in the
	// field) reports row 7's failure only once the source set it aside.
	body := `{% if iter.job.first %}DO $$ BEGIN FOR i IN 1..1200 LOOP EXIT WHEN EXISTS (SELECT 1 FROM ` + table +
		` WHERE id = 7 AND status = 'dead'); PERFORM pg_sleep(0.05); END LOOP; END $$; {% endif %}` +
		`SELECT CASE WHEN {{ iter.job.id }} = 7 THEN 1/0 END; UPDATE ` + table + ` SET status = 'done', done_count = done_count + 1 WHERE id = {{ iter.job.id }}`
	src := header + `workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          ` + claim + `
        release: UPDATE ` + table + ` SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(',') }})
        dead_letter: UPDATE ` + table + ` SET status = 'dead' WHERE id IN ({{ keys | join(',') }})
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 4
        frame: {max_rows: 20, process: row, max_attempts: 3}
    tool:
      kind: postgres
      auth: pg
      command: "` + strings.ReplaceAll(body, `"`, `\"`) + `"
`
	sum, evs := runPlaybook(t, e, log, src, engine.StartOptions{}, time.Minute)
	t.Cleanup(func() { dumpOnFail(t, evs) })
	var done, dead, pending int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'dead' AND id = 7),
		count(*) FILTER (WHERE status IN ('pending', 'claimed')) FROM `+table).Scan(&done, &dead, &pending); err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCompleted || done != 199 || dead != 1 || pending != 0 {
		t.Fatalf("summary %s (%s); %d done, row 7 dead: %d, %d left pending: want completed, 199 done, row 7 dead, none pending",
			sum.Status, sum.Error, done, dead, pending)
	}
	// The same history recorded under semantics 7 folds as it was
	// decided then: the late failure of delivery 1 stops the loop.
	if l := foldBeforeLoopDone(t, evs, 7).Loops["start#1"]; l == nil || !strings.Contains(l.Fail, "row 7 failed") {
		t.Fatalf("semantics 7 fold: loop %+v, want it stopped on row 7", l)
	}
}
