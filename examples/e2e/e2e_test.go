package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// drainPlaybook drains {{ table }} through a postgres cursor loop, one
// set-based UPDATE per frame.
//
// Exactly once in the table, whatever dies when:
//   - The body only touches rows still 'claimed' and moves them to 'done'
//     in the same statement, so running a frame twice (a re-issued frame
//     while its first attempt is still alive, a redelivery) increments
//     done_count once: the second UPDATE re-checks status after the first
//     committed and skips the row.
//   - The claim is the natural one: no reclaim clause, no tag. Its rows
//     are either on record (frame.claimed; a re-issued frame brings them)
//     or, when the worker died before the record, its transaction was
//     rolled back by PostgreSQL and the rows are pending again.
//   - release (a claim the orchestrator refused as stale, rows whose
//     body failed) only touches rows still 'claimed', never 'done' ones.
const drainPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: e2e-drain}
workload: {table: items, sleep: 0}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          WITH c AS (
            SELECT id FROM {{ table }} WHERE status = 'pending'
             ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
          UPDATE {{ table }} q SET status = 'claimed' FROM c WHERE q.id = c.id RETURNING q.id
        release: UPDATE {{ table }} SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(',') }})
      iterator: job
      spec:
        mode: cursor
        max_in_flight: {{MAX_IN_FLIGHT}}
        frame: {max_rows: 200, process: frame, lease_seconds: 3, max_attempts: 10}
    tool:
      kind: postgres
      auth: pg
      command: >-
        SELECT pg_sleep({{ sleep }});
        UPDATE {{ table }} q SET status = 'done', done_count = q.done_count + 1
          FROM jsonb_to_recordset({{ iter.job | tojson | sql_literal }}::jsonb) AS r(id bigint)
         WHERE q.id = r.id AND q.status = 'claimed'
    next:
      - step: verify
        when: '{{ event.name == "loop.done" }}'
  - step: verify
    tool:
      kind: postgres
      auth: pg
      query: SELECT count(*) FILTER (WHERE status = 'done') AS done FROM {{ table }}
`

func playbook(maxInFlight int) string {
	return strings.ReplaceAll(drainPlaybook, "{{MAX_IN_FLIGHT}}", fmt.Sprint(maxInFlight))
}

// env is one test's database schema, NATS prefix and item table.
type env struct {
	dsn, natsURL, schema, prefix, table string
	// token is the servers' API token.
	token string
	pool  *pgxpool.Pool
}

func newEnv(t testing.TB, rows int) *env {
	t.Helper()
	dsn := testenv.Postgres(t)
	natsURL := testenv.NATS(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	e := &env{dsn: dsn, natsURL: natsURL, schema: "e2e_" + suffix, prefix: "e2e" + suffix, pool: pool, token: "tok-" + suffix}
	e.table = e.schema + ".items"
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+e.schema+" CASCADE")
		pool.Close()
		if nc, err := nats.Connect(natsURL); err == nil {
			_ = natsjs.Delete(context.Background(), natsjs.Config{Conn: nc, Prefix: e.prefix})
			nc.Close()
		}
	})
	_, err = pool.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s;
CREATE TABLE %[2]s (id bigint PRIMARY KEY, status text NOT NULL DEFAULT 'pending',
  done_count int NOT NULL DEFAULT 0);
INSERT INTO %[2]s (id) SELECT g FROM generate_series(1, %[3]d) g`, e.schema, e.table, rows))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) server(t testing.TB, bin, name string) *replica {
	return e.serverEnv(t, bin, name, nil)
}

// serverEnv starts a server replica with env added to its environment
// and extra flags after the usual ones (a flag given twice takes the
// later value).
func (e *env) serverEnv(t testing.TB, bin, name string, env []string, extra ...string) *replica {
	addr := freeAddr(t)
	args := append([]string{"--listen", addr, "--eventlog", e.dsn, "--schema", e.schema, "--nats", e.natsURL,
		"--prefix", e.prefix, "--id", name, "--lease", "3s", "--command-lease", "3s", "--ack-wait", "5s", "--event-ack-wait", "2s",
		"--token", e.token}, extra...)
	p := startEnv(t, name, env, bin, args...)
	return &replica{proc: p, addr: addr, token: e.token}
}

func (e *env) worker(t testing.TB, bin, name string, concurrency int) *proc {
	return e.workerEnv(t, bin, name, concurrency, nil)
}

// workerEnv starts a worker with env added to its environment and extra
// flags after the usual ones.
func (e *env) workerEnv(t testing.TB, bin, name string, concurrency int, env []string, extra ...string) *proc {
	args := append([]string{"--nats", e.natsURL, "--prefix", e.prefix, "--id", name, "--concurrency", fmt.Sprint(concurrency),
		"--ack-wait", "5s", "--report-timeout", "10s", "--grace", "2s", "--credential", "pg=" + e.dsn}, extra...)
	return startEnv(t, name, env, bin, args...)
}

func (e *env) done(ctx context.Context) (int, error) {
	var n int
	err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+e.table+" WHERE status = 'done'").Scan(&n)
	return n, err
}

// terminal returns the execution's terminal event type, "" while it runs.
// ended reports whether execution id has ended, and fails the test if it
// ended other than completed.
func (e *env) ended(ctx context.Context, t *testing.T, id string) bool {
	t.Helper()
	term, err := e.terminal(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if term != "" && term != "execution.completed" {
		t.Fatalf("execution ended %s", term)
	}
	return term != ""
}

func (e *env) terminal(ctx context.Context, id string) (string, error) {
	var term *string
	err := e.pool.QueryRow(ctx, "SELECT terminal FROM "+e.schema+".executions WHERE execution_id = $1", id).Scan(&term)
	if err != nil || term == nil {
		return "", err
	}
	return *term, nil
}

// TestDrainSurvivesWorkerAndLeaderKills drains 50,000 rows with two
// server replicas and three workers, SIGKILLs a worker and then the
// leading replica mid-run, and checks every row was processed exactly
// once, no claim is left behind and loop.done is recorded once.
func TestDrainSurvivesWorkerAndLeaderKills(t *testing.T) {
	const rows = 50000
	e := newEnv(t, rows)
	serverBin, workerBin := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	replicas := []*replica{e.server(t, serverBin, "server-a"), e.server(t, serverBin, "server-b")}
	for _, r := range replicas {
		r.waitHealthy(ctx, t)
	}
	lead := leaderOf(ctx, t, replicas)
	workers := []*proc{e.worker(t, workerBin, "worker-1", 4), e.worker(t, workerBin, "worker-2", 4), e.worker(t, workerBin, "worker-3", 4)}

	// A standby refuses writes.
	for _, r := range replicas {
		if r != lead {
			code, _ := r.do(ctx, http.MethodPost, "/v1/executions", api.StartRequest{Source: playbook(6), File: "drain.yaml"}, nil)
			if code != http.StatusServiceUnavailable {
				t.Fatalf("standby answered %d to a start, want 503", code)
			}
		}
	}
	began := time.Now()
	var started api.Started
	if _, err := lead.do(ctx, http.MethodPost, "/v1/executions", api.StartRequest{
		Source: playbook(6), File: "drain.yaml", Workload: map[string]any{"table": e.table, "sleep": 0.2},
	}, &started); err != nil {
		t.Fatal(err)
	}
	id := started.ExecutionID

	killedWorker, killedLeader := false, false
	var failoverAt time.Time
	for !e.ended(ctx, t, id) {
		n, err := e.done(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !killedWorker && n >= rows/5 {
			workers[0].kill()
			killedWorker = true
			t.Logf("%6.2fs: SIGKILL worker-1 at %d rows done", time.Since(began).Seconds(), n)
		}
		if killedWorker && !killedLeader && n >= rows/2 {
			lead.kill()
			killedLeader = true
			failoverAt = time.Now()
			t.Logf("%6.2fs: SIGKILL leader %s at %d rows done", time.Since(began).Seconds(), lead.name, n)
			lead = leaderOf(ctx, t, replicas)
			t.Logf("%6.2fs: %s leads after %s", time.Since(began).Seconds(), lead.name, time.Since(failoverAt).Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the drain did not finish: %d of %d rows done", n, rows)
		case <-time.After(50 * time.Millisecond):
		}
	}
	took := time.Since(began)
	if !killedWorker || !killedLeader {
		t.Fatalf("the drain finished before the kills (worker %v, leader %v): make it slower", killedWorker, killedLeader)
	}

	var total, doneOnce, claimed, maxDone int
	if err := e.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'done' AND done_count = 1),
		count(*) FILTER (WHERE status = 'claimed'), coalesce(max(done_count), 0) FROM `+e.table).Scan(&total, &doneOnce, &claimed, &maxDone); err != nil {
		t.Fatal(err)
	}
	if total != rows || doneOnce != rows || claimed != 0 || maxDone != 1 {
		t.Fatalf("rows %d, done exactly once %d, left claimed %d, max done_count %d; want %d, %d, 0, 1", total, doneOnce, claimed, maxDone, rows, rows)
	}
	var loopDone, events, reissued int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE type = 'loop.done'), count(*),
		count(*) FILTER (WHERE type = 'command.issued' AND attempt > 1) FROM `+e.schema+`.events WHERE execution_id = $1`, id).Scan(&loopDone, &events, &reissued); err != nil {
		t.Fatal(err)
	}
	if loopDone != 1 {
		t.Fatalf("loop.done recorded %d times", loopDone)
	}
	var st engine.Status
	if _, err := lead.do(ctx, http.MethodGet, "/v1/executions/"+id, nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Status != engine.StatusCompleted || st.Steps["verify"] != "completed" {
		t.Fatalf("status %+v", st)
	}
	ls := st.Loops["start#1"]
	t.Logf("drained %d rows in %s (%.0f rows/s with 0.2s per frame, one worker and the leader killed): "+
		"%d events (%.4f per row), %d frames, %d re-issued attempts, loop ok=%d failed=%d dead=%d",
		rows, took.Round(time.Millisecond), float64(rows)/took.Seconds(), events, float64(events)/rows, ls.Frames, reissued, ls.OK, ls.Failed, ls.Dead)
	if ls.Dead != 0 {
		t.Errorf("%d rows dead-lettered", ls.Dead)
	}
	for _, w := range workers[1:] {
		if !w.alive() {
			t.Errorf("%s died", w.name)
		}
	}
}
