package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestDrainSurvivesDroppedConnections drains a queue with the natural
// claim while the server keeps ending every connection of the drain's
// application_name (a restart, a failover, pg_terminate_backend): claims
// whose commit failed hand their rows back, bodies whose connection died
// run again on a fresh one (the postgres tool retries a statement once
// when its connection was lost), and every row ends done, none left
// claimed.
func TestDrainSurvivesDroppedConnections(t *testing.T) {
	dsn := testenv.Postgres(t)
	for _, tc := range []struct {
		process, body string
		n             int
	}{
		{"frame", `UPDATE {{ table }} q SET status = 'done', result = r.payload * 2, done_count = q.done_count + 1
          FROM jsonb_to_recordset({{ iter.job | tojson | sql_literal }}::jsonb) AS r(id int, payload int)
          WHERE q.id = r.id AND q.status = 'claimed'`, 20_000},
		{"row", `UPDATE {{ table }} SET status = 'done', result = {{ iter.job.payload }} * 2, done_count = done_count + 1
          WHERE id = {{ iter.job.id }} AND status = 'claimed'`, 3_000},
	} {
		t.Run(tc.process, func(t *testing.T) {
			pool, table := pgQueue(t, dsn, tc.n)
			app := "cf_" + table
			e, log := cursorEngine(t, testenv.WithAppName(dsn, app))
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
        frame: {max_rows: 100, process: ` + tc.process + `, row_concurrency: 4}
    tool:
      kind: postgres
      auth: pg
      command: |
        ` + tc.body + `
`
			// The fault: end the drain's connections six times as it
			// goes, at each seventh of the rows done, as a server restart
			// or a failover would. Progress, not a clock, sets the moments,
			// so however fast the machine, every kill lands mid-drain. (A
			// statement that fails twice in a row on lost connections
			// fails: a storm of drops faster than a statement runs is
			// not what this covers.)
			var kills, rounds atomic.Int64
			stop := make(chan struct{})
			killed := make(chan struct{})
			go func() {
				defer close(killed)
				for k := 1; k <= 6; {
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
					var done int
					if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s WHERE status = 'done'`, table)).Scan(&done); err != nil {
						continue
					}
					if done < k*tc.n/7 {
						continue
					}
					for done >= k*tc.n/7 {
						k++
					}
					var n int64
					if err := pool.QueryRow(context.Background(),
						`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err == nil {
						kills.Add(n)
						rounds.Add(1)
					}
				}
			}()
			sum, evs := runPlaybook(t, e, log, src, engine.StartOptions{}, 2*time.Minute)
			close(stop)
			<-killed
			if sum.Status != engine.StatusCompleted {
				dumpOnFail(t, evs)
				t.Fatalf("status %s: %s", sum.Status, sum.Error)
			}
			if kills.Load() == 0 || rounds.Load() < 2 {
				t.Fatalf("%d connections of the drain were ended in %d rounds: the test proved little", kills.Load(), rounds.Load())
			}
			var done, claimed, maxDone int
			if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FILTER (WHERE status = 'done' AND result = payload * 2),
				count(*) FILTER (WHERE status = 'claimed'), max(done_count) FROM %s`, table)).Scan(&done, &claimed, &maxDone); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d connections ended during the drain, in %d rounds", kills.Load(), rounds.Load())
			if done != tc.n || claimed != 0 || maxDone != 1 {
				t.Fatalf("done=%d claimed=%d max done_count=%d, want %d, 0, 1", done, claimed, maxDone, tc.n)
			}
		})
	}
}
