package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// pgQueue creates a work queue table of n pending rows and drops it after
// the test.
func pgQueue(t *testing.T, dsn string, n int) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	table := fmt.Sprintf("engine_q_%d", rand.Uint32())
	_, err = pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s (id int PRIMARY KEY, payload int NOT NULL, status text NOT NULL DEFAULT 'pending',
		attempts int NOT NULL DEFAULT 0, result int, done_count int NOT NULL DEFAULT 0);
		INSERT INTO %[1]s (id, payload) SELECT g, g FROM generate_series(1, %[2]d) g`, table, n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	return pool, table
}

func cursorEngine(t *testing.T, dsn string) (*engine.Engine, eventlog.Log) {
	t.Helper()
	kc := tools.StaticURLs(map[string]string{"pg": dsn})
	treg, creg, closer := stdwire.Registries(kc, nil, false)
	t.Cleanup(func() { _ = closer.Close() })
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, log
}

const claimSQL = `
        claim: |
          WITH c AS (
            SELECT id FROM {{ table }} WHERE status = 'pending'
            ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
          UPDATE {{ table }} q SET status = 'claimed', attempts = q.attempts + 1
          FROM c WHERE q.id = c.id RETURNING q.id, q.payload`

func TestCursorLoopDrainsPostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
	for _, tc := range []struct {
		name, process, body string
	}{
		{"row", "row", `UPDATE {{ table }} SET status = 'done', result = {{ iter.job.payload }} * 2, done_count = done_count + 1 WHERE id = {{ iter.job.id }}`},
		{"frame", "frame", `UPDATE {{ table }} q SET status = 'done', result = r.payload * 2, done_count = q.done_count + 1
          FROM jsonb_to_recordset({{ iter.job | tojson | sql_literal }}::jsonb) AS r(id int, payload int) WHERE q.id = r.id`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 1000
			pool, table := pgQueue(t, dsn, n)
			e, log := cursorEngine(t, dsn)
			src := header + `
workload: {table: ` + table + `}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg` + claimSQL + `
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 4
        frame: {max_rows: 50, row_concurrency: 4, process: ` + tc.process + `}
    tool:
      kind: postgres
      auth: pg
      command: "` + tc.body + `"
    next:
      - step: verify
        when: '{{ event.name == "loop.done" }}'
  - step: verify
    tool:
      kind: postgres
      auth: pg
      query: SELECT count(*) FILTER (WHERE status = 'done') AS done, max(done_count) AS max_done FROM {{ table }}
`
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			id, err := e.Start(ctx, []byte(src), engine.StartOptions{File: "cursor.yaml"})
			if err != nil {
				t.Fatal(err)
			}
			sum, err := e.Wait(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := log.Read(ctx, id, 0, 0)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s %s %s", sum.Status, sum.Step, sum.Field, sum.Error)
			}
			var done, maxDone int
			if err := pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE status = 'done' AND result = payload * 2), max(done_count) FROM "+table).Scan(&done, &maxDone); err != nil {
				t.Fatal(err)
			}
			if done != n || maxDone != 1 {
				t.Fatalf("done=%d max_done=%d, want %d and 1", done, maxDone, n)
			}
			if c := logtest.CountType(evs, eventlog.TypeLoopDone); c != 1 {
				t.Fatalf("loop.done recorded %d times", c)
			}
			st, err := engine.Inspect(ctx, log, id)
			if err != nil {
				t.Fatal(err)
			}
			ls := st.Loops["start#1"]
			if ls.OK != n || ls.Rows != n {
				t.Fatalf("loop status %+v, want %d rows ok", ls, n)
			}
			perItem := float64(len(evs)) / n
			t.Logf("%d events for %d rows: %.3f events per row, %d frames", len(evs), n, perItem, ls.Frames)
			if perItem > 0.1 {
				t.Fatalf("%.3f events per row at max_rows 50, want <= 0.1", perItem)
			}
		})
	}
}
