package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// frameBenchRows is the size of the frame BenchmarkFrameRows runs.
const frameBenchRows = 100

// frameSink is the Reporter of BenchmarkFrameRows: it keeps the last
// frame.done, so the benchmark can check every row ran.
type frameSink struct {
	done atomic.Pointer[eventlog.Event]
}

func (s *frameSink) Report(_ context.Context, ev eventlog.Event) error {
	if ev.Type == eventlog.TypeFrameDone {
		s.done.Store(&ev)
	}
	return nil
}

func (s *frameSink) Heartbeat(context.Context, string, string) error { return nil }

// BenchmarkFrameRows runs the worker's row path for one frame of 100
// rows claimed from PostgreSQL: claim, frame.claimed, each row's scope,
// render and tool run (noop, or the postgres tool marking the row done as
// the bench program does), ack and the frame.done payload; and, as
// postgres-frame, the frame path (process: frame), one statement marking
// the frame's rows done, as the bench program's frame mode does. One op is one
// frame; the queue is reset between ops outside the timer.
//
// raw-claim and raw-postgres are the same SQL without the engine (the
// claim alone; the claim and an UPDATE per row, 4 at once through a pool
// of their own), and every run reports this process's CPU time per row
// (cpu-µs/row, user and system): the engine's cost per row is the
// difference, which on a small machine is what a drain's rate follows.
func BenchmarkFrameRows(b *testing.B) {
	dsn := testenv.PostgresSchema(b)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE q (id bigint PRIMARY KEY, status text NOT NULL, payload jsonb, claimed_at timestamptz, done_at timestamptz);
		INSERT INTO q SELECT i, 'pending', jsonb_build_object('n', i, 'name', 'job ' || i) FROM generate_series(1, `+fmt.Sprint(frameBenchRows)+`) i`); err != nil {
		b.Fatal(err)
	}
	kc := tools.StaticURLs(map[string]string{"pg": dsn})
	treg, creg, closer := stdwire.Registries(kc, slog.New(slog.DiscardHandler), false)
	defer closer.Close()
	w := &engine.Worker{ID: "bench", Tools: treg, Cursors: creg, Keychain: kc, Logger: slog.New(slog.DiscardHandler)}
	bodies := map[string]string{
		"noop":     "kind: noop, id: '{{ iter.job.id }}'",
		"postgres": "kind: postgres, auth: pg, command: \"UPDATE q SET status = 'done', done_at = now() WHERE id = {{ iter.job.id }}\"",
		// process: frame, one set-based statement for the frame's rows
		"postgres-frame": "kind: postgres, auth: pg, command: \"UPDATE q SET status = 'done', done_at = now() " +
			"FROM jsonb_to_recordset({{ iter.job | tojson | sql_literal }}::jsonb) AS r(id bigint) WHERE q.id = r.id\"",
	}
	// claimSQL claims limit rows: a number, or the engine's template.
	claimSQL := func(limit string) string {
		return "WITH c AS (SELECT id FROM q WHERE status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT " + limit + ") " +
			"UPDATE q SET status = 'claimed', claimed_at = now() FROM c WHERE q.id = c.id RETURNING q.id, q.payload"
	}
	// frames runs frame once per op on a queue reset outside the timer,
	// and reports the process's CPU time per row.
	frames := func(b *testing.B, frame func()) {
		b.ReportAllocs()
		var cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			if _, err := pool.Exec(ctx, `UPDATE q SET status = 'pending', claimed_at = NULL, done_at = NULL`); err != nil {
				b.Fatal(err)
			}
			c0 := processCPU()
			b.StartTimer()
			frame()
			cpu += processCPU() - c0
		}
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*frameBenchRows), "cpu-µs/row")
	}
	rawPool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer rawPool.Close()
	for _, name := range []string{"raw-claim", "raw-postgres"} {
		b.Run(name, func(b *testing.B) {
			frames(b, func() {
				rawFrame(ctx, b, pool, rawPool, claimSQL(strconv.Itoa(frameBenchRows)), name == "raw-postgres")
			})
		})
	}
	for _, name := range []string{"noop", "postgres", "postgres-frame"} {
		process := "row"
		if name == "postgres-frame" {
			process = "frame"
		}
		b.Run(name, func(b *testing.B) {
			claim := claimSQL("{{ __frame_max_rows }}")
			src := fmt.Sprintf("workflow:\n- step: start\n  loop:\n    cursor: {kind: postgres, auth: pg, claim: %q}\n"+
				"    iterator: job\n    spec: {mode: cursor, frame: {max_rows: %d, row_concurrency: 4, process: %s}}\n"+
				"  tool: {%s}\n", claim, frameBenchRows, process, bodies[name])
			pb, err := dsl.Parse("bench.yaml", []byte(src))
			if err != nil {
				b.Fatal(err)
			}
			cmd := &engine.Command{ExecutionID: "e1", ID: "c1@1", Base: "c1", Attempt: 1, Kind: engine.KindFrame,
				Step: "start", Run: "r1", Playbook: pb, Lease: time.Minute,
				Scope: map[string]any{"workload": map[string]any{}, "ctx": map[string]any{}, "vars": map[string]any{}, "execution_id": "e1"}}
			sink := &frameSink{}
			frames(b, func() {
				if err := w.Execute(ctx, cmd, sink); err != nil {
					b.Fatal(err)
				}
			})
			done := sink.done.Load()
			if done == nil || !strings.Contains(string(done.Payload), `"ok":`+fmt.Sprint(frameBenchRows)) {
				b.Fatalf("frame.done = %v", done)
			}
		})
	}
}

// rawFrame claims a frame with claim and, with rows, marks each claimed
// row done, 4 at once through bodies, as the engine's row path does
// without the engine.
func rawFrame(ctx context.Context, b *testing.B, claims, bodies *pgxpool.Pool, claim string, rows bool) {
	rs, err := claims.Query(ctx, claim, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		b.Fatal(err)
	}
	var ids []int64
	for rs.Next() {
		var id int64
		var payload []byte
		if err := rs.Scan(&id, &payload); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	rs.Close()
	if err := rs.Err(); err != nil || len(ids) != frameBenchRows {
		b.Fatalf("claimed %d rows: %v", len(ids), err)
	}
	if !rows {
		return
	}
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := bodies.Exec(ctx, "UPDATE q SET status = 'done', done_at = now() WHERE id = "+strconv.FormatInt(id, 10), pgx.QueryExecModeSimpleProtocol); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
