package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/tools"
)

// benchRows is the queue size one benchmark iteration drains.
const benchRows = 50000

// itemsPlaybook runs a noop command per item: it measures the transport
// and the event log, not a database body.
const itemsPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: e2e-items}
workload: {n: 2000}
workflow:
  - step: start
    loop:
      in: '{{ range(n) | list }}'
      iterator: i
      spec: {mode: parallel, max_in_flight: 64}
    tool: {kind: noop, i: '{{ i }}'}
`

// benchItems is the number of commands one BenchmarkCommands iteration runs.
const benchItems = 2000

// BenchmarkCommands runs benchItems noop commands (a parallel loop, 64 in
// flight) in-process and through NATS with 1, 2 and 4 worker processes:
// the per-command cost of the transport and the event log (each command
// is a command.issued and a command.completed event).
func BenchmarkCommands(b *testing.B) {
	benchAll(b, itemsPlaybook, benchItems, 0)
}

// BenchmarkDrain drains benchRows rows (frames of 200, one set-based
// UPDATE each, 16 frames in flight) in-process and through NATS with 1, 2
// and 4 worker processes (8 commands each), and reports items/s (rows), the event
// log's appended events/s and appends/s (events of one orchestrator step
// share a timestamp, so distinct timestamps count appends).
//
//	go test -run '^$' -bench Drain -benchtime 3x ./examples/e2e/
func BenchmarkDrain(b *testing.B) {
	benchAll(b, playbook(16), benchRows, benchRows)
}

// benchAll runs src (items per execution) in-process and through NATS;
// rows > 0 sets up a queue table of that many rows, checked after each
// run.
func benchAll(b *testing.B, src string, items, rows int) {
	b.Run("inproc", func(b *testing.B) {
		e := newEnv(b, rows)
		log, err := pglog.Open(context.Background(), e.dsn, pglog.Config{Schema: e.schema})
		if err != nil {
			b.Fatal(err)
		}
		defer log.Close()
		kc := tools.StaticURLs(map[string]string{"pg": e.dsn})
		treg, creg, closer := stdwire.Registries(kc, nil, false)
		defer closer.Close()
		eng, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc})
		if err != nil {
			b.Fatal(err)
		}
		defer eng.Close()
		e.drain(b, items, rows, func(ctx context.Context) (string, error) {
			id, err := eng.Start(ctx, []byte(src), engine.StartOptions{File: "drain.yaml", Workload: map[string]any{"table": e.table}})
			if err != nil {
				return "", err
			}
			_, err = eng.Wait(ctx, id)
			return id, err
		})
	})
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("nats-%dworkers", workers), func(b *testing.B) {
			e := newEnv(b, rows)
			serverBin, workerBin := binaries(b)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			srv := e.server(b, serverBin, "server")
			lead := leaderOf(ctx, b, []*replica{srv})
			for i := range workers {
				e.worker(b, workerBin, fmt.Sprintf("worker-%d", i+1), 8)
			}
			e.drain(b, items, rows, func(ctx context.Context) (string, error) {
				var started api.Started
				if _, err := lead.do(ctx, http.MethodPost, "/v1/executions", api.StartRequest{
					Source: src, File: "drain.yaml", Workload: map[string]any{"table": e.table},
				}, &started); err != nil {
					return "", err
				}
				for {
					term, err := e.terminal(ctx, started.ExecutionID)
					if err != nil || term != "" {
						return started.ExecutionID, err
					}
					select {
					case <-ctx.Done():
						return "", ctx.Err()
					case <-time.After(5 * time.Millisecond):
					}
				}
			})
		})
	}
}

// drain runs b.N executions through run, resetting the queue (if rows >
// 0) between them, and reports the figures.
func (e *env) drain(b *testing.B, items, rows int, run func(ctx context.Context) (string, error)) {
	ctx := context.Background()
	var elapsed time.Duration
	var events, appends int64
	for i := 0; i < b.N; i++ {
		if rows > 0 {
			if _, err := e.pool.Exec(ctx, "UPDATE "+e.table+" SET status = 'pending', done_count = 0"); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		id, err := run(ctx)
		if err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
		var n, a, bad int64
		if err := e.pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT time) FROM "+e.schema+".events WHERE execution_id = $1", id).Scan(&n, &a); err != nil {
			b.Fatal(err)
		}
		if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+e.table+" WHERE status <> 'done' OR done_count <> 1").Scan(&bad); err != nil {
			b.Fatal(err)
		}
		var term string
		if err := e.pool.QueryRow(ctx, "SELECT coalesce(terminal, '') FROM "+e.schema+".executions WHERE execution_id = $1", id).Scan(&term); err != nil || term != "execution.completed" {
			b.Fatalf("execution ended %q (%v)", term, err)
		}
		if bad != 0 {
			b.Fatalf("%d rows not done exactly once", bad)
		}
		events += n
		appends += a
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(items*b.N)/elapsed.Seconds(), "items/s")
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(appends)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(events)/float64(max(appends, 1)), "events/append")
	b.ReportMetric(elapsed.Seconds()/float64(b.N), "s/run")
}
