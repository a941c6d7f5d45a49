package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	for _, name := range []string{"noop", "postgres", "postgres-frame"} {
		process := "row"
		if name == "postgres-frame" {
			process = "frame"
		}
		b.Run(name, func(b *testing.B) {
			claim := "WITH c AS (SELECT id FROM q WHERE status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }}) " +
				"UPDATE q SET status = 'claimed', claimed_at = now() FROM c WHERE q.id = c.id RETURNING q.id, q.payload"
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
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				if _, err := pool.Exec(ctx, `UPDATE q SET status = 'pending', claimed_at = NULL, done_at = NULL`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := w.Execute(ctx, cmd, sink); err != nil {
					b.Fatal(err)
				}
			}
			done := sink.done.Load()
			if done == nil || !strings.Contains(string(done.Payload), `"ok":`+fmt.Sprint(frameBenchRows)) {
				b.Fatalf("frame.done = %v", done)
			}
		})
	}
}
