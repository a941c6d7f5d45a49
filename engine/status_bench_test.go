package engine

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

var statusEvents = flag.Int("status.events", 1_000_000, "events in the history BenchmarkStatus reads")

const statusBenchPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: long-drain}
workflow:
  - step: start
    loop:
      cursor: {kind: postgres, auth: pg, claim: "UPDATE q SET status = 'claimed' WHERE id IN (SELECT id FROM q WHERE status = 'pending' LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED) RETURNING id, payload"}
      iterator: job
      spec: {mode: cursor, max_in_flight: 4, frame: {max_rows: 10}}
    tool: {kind: postgres, auth: pg, command: "UPDATE q SET status = 'done' WHERE id = {{ iter.job.id }}"}
`

// statusHistory appends a running cursor drain of about n events to log,
// shaped as the engine writes them: per frame a command.issued, a
// frame.claimed with its 10 rows and a frame.done with their outcomes,
// four slots at a time. It returns the execution id and the frames.
func statusHistory(b *testing.B, log eventlog.Log, n int) (string, int) {
	ctx := context.Background()
	id := fmt.Sprintf("bench-status-%08x", rand.Uint32())
	at := time.Now().Add(-time.Duration(n) * time.Millisecond).UTC()
	tick := func() time.Time { at = at.Add(time.Millisecond); return at }
	const run, slots, rows = "start#1", 4, 10
	batch := []eventlog.Event{
		{ExecutionID: id, Type: eventlog.TypeExecutionStarted, Time: tick(),
			Payload: mustJSON(startedPayload{Playbook: statusBenchPlaybook, File: "long-drain.yaml", Workload: map[string]any{}})},
		{ExecutionID: id, Type: eventlog.TypeLoopStarted, Step: "start", LoopID: run, Time: tick(),
			Payload: mustJSON(loopStartedPayload{Run: run, Mode: "cursor", MaxInFlight: slots})},
	}
	total := len(batch)
	frames := 0
	flush := func() {
		if _, err := log.Append(ctx, batch); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for total+3 <= n {
		slot, f := frames%slots, frames/slots+1
		base := fmt.Sprintf("%s/s%d.f%d", run, slot, f)
		cmd := commandID(base, 1)
		claimed := make([]FrameRow, rows)
		items := make([]ItemOutcome, rows)
		for r := range claimed {
			key := fmt.Sprint(frames*rows + r)
			claimed[r] = FrameRow{Key: key, Values: map[string]any{"id": frames*rows + r, "payload": "job-" + key}}
			items[r] = ItemOutcome{Key: key, Outcome: OutcomeOK, Ms: 3}
		}
		batch = append(batch,
			eventlog.Event{ExecutionID: id, Type: eventlog.TypeCommandIssued, Step: "start", LoopID: run, CommandID: cmd,
				Attempt: 1, Frame: f, Time: tick(), Payload: mustJSON(issuedPayload{Kind: KindFrame, Run: run, Base: base, Slot: slot})},
			eventlog.Event{ExecutionID: id, Type: eventlog.TypeFrameClaimed, Step: "start", LoopID: run, CommandID: cmd,
				Attempt: 1, Frame: f, WorkerID: "w-bench", Time: tick(), Payload: mustJSON(frameClaimedPayload{Rows: claimed})},
			eventlog.Event{ExecutionID: id, Type: eventlog.TypeFrameDone, Step: "start", LoopID: run, CommandID: cmd,
				Attempt: 1, Frame: f, WorkerID: "w-bench", Time: tick(),
				Payload: mustJSON(frameDonePayload{Items: items, Counts: countOutcomes(items), Ms: 30})})
		total += 3
		frames++
		if len(batch) >= 3000 {
			flush()
		}
	}
	flush()
	return id, frames
}

// BenchmarkStatus measures the status of a running execution of
// -status.events events (1,000,000 by default) in PostgreSQL, as the API
// answers GET /v1/executions/{id}: before, by folding the whole history
// (Inspect); after, from a Projection kept current by reading the log's
// tail; and from a fresh Projection (a restarted or other replica) that
// continues from the snapshot in the log. It builds the history once and
// logs the ratios.
//
//	go test -run '^$' -bench Status -benchtime 5x ./engine
func BenchmarkStatus(b *testing.B) {
	dsn := testenv.Postgres(b)
	ctx := context.Background()
	pcfg, err := postgres.ParsePoolConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		b.Fatal(err)
	}
	schema := fmt.Sprintf("bench_status_%08x", rand.Uint32())
	b.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		pool.Close()
	})
	log, err := postgres.New(ctx, pool, postgres.Config{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	built := time.Now()
	id, frames := statusHistory(b, log, *statusEvents)
	b.Logf("built a history of %d events (%d frames) in %s", *statusEvents, frames, time.Since(built).Round(time.Millisecond))

	want, err := Inspect(ctx, log, id)
	if err != nil {
		b.Fatal(err)
	}
	if l := want.Loops["start#1"]; want.Status != StatusRunning || l.Rows != frames*10 || l.OK != frames*10 {
		b.Fatalf("the history folds to %+v", want)
	}
	perOp := map[string]time.Duration{}
	measure := func(name string, status func() (*Status, error)) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				st, err := status()
				if err != nil {
					b.Fatal(err)
				}
				if st.LastSeq != want.LastSeq {
					b.Fatalf("status at seq %d, want %d", st.LastSeq, want.LastSeq)
				}
			}
			perOp[name] = b.Elapsed() / time.Duration(b.N)
		})
	}
	measure("before=full-fold", func() (*Status, error) { return Inspect(ctx, log, id) })
	warm, err := NewProjection(ProjectionConfig{Log: log})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := warm.Status(ctx, id); err != nil { // the one fold; it saves a snapshot
		b.Fatal(err)
	}
	measure("after=projection", func() (*Status, error) { return warm.Status(ctx, id) })
	measure("after=fresh-projection-from-snapshot", func() (*Status, error) {
		p, err := NewProjection(ProjectionConfig{Log: log})
		if err != nil {
			return nil, err
		}
		return p.Status(ctx, id)
	})
	before := perOp["before=full-fold"]
	for _, name := range []string{"after=projection", "after=fresh-projection-from-snapshot"} {
		if d := perOp[name]; d > 0 && before > 0 {
			b.Logf("status of a %d-event execution: full fold %s, %s %s (%.0fx faster)",
				*statusEvents, before.Round(time.Millisecond), name, d, float64(before)/float64(d))
		}
	}
}
