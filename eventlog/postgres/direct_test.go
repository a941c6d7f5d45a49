package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// modePool returns a pool in exec mode mode of at most conns connections
// (0: pgx's default), with a tracer if one is given, closed on cleanup.
// With one connection, what the pool prepared is visible to a query.
func modePool(t *testing.T, mode pgx.QueryExecMode, conns int32, tracer ...pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	if conns > 0 {
		cfg.MaxConns = conns
	}
	cfg.ConnConfig.DefaultQueryExecMode = mode
	for _, tr := range tracer {
		cfg.ConnConfig.Tracer = tr
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// preparedDirect reports whether the pool's connection holds the lean
// append prepared by name (the direct path ran on it).
func preparedDirect(t *testing.T, pool *pgxpool.Pool) bool {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'cursorflow_append_plain_%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestDirectAppendStoresWhatThePgxPathStores appends the same batches to
// a log whose pool prepares statements by name (pgx's default: the lean
// statement's batches go through the direct path) and to one whose pool
// does not (every batch through pgx), and reads both back: every field
// of every event must be the same, down to empty strings, absent
// payloads, times to the microsecond and a payload of several MiB.
func TestDirectAppendStoresWhatThePgxPathStores(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	direct := modePool(t, pgx.QueryExecModeCacheStatement, 1)
	viaPgx := modePool(t, pgx.QueryExecModeExec, 1)
	logs := []eventlog.Log{newLog(t, direct, randomSchema(t, direct)), newLog(t, viaPgx, randomSchema(t, viaPgx))}
	id := logtest.ExecutionID("direct")
	at := time.Date(2026, 11, 28, 15, 4, 5, 123456789, time.UTC)
	big := `{"rows":"` + strings.Repeat("é<x>\\\"", 500_000) + `"}`
	batches := [][]eventlog.Event{
		{{ExecutionID: id, Type: eventlog.TypeExecutionStarted, Payload: []byte(`{"playbook":"p"}`), Time: at}},
		{
			{ExecutionID: id, Type: eventlog.TypeCommandIssued, Step: "start", CommandID: "c1", LoopID: "l1", Frame: 3, Attempt: 2,
				Payload: []byte(`{"kind":"frame","n":1e400}`), Meta: []byte(`{"trace":"t"}`), Time: at},
			{ExecutionID: id, Type: eventlog.TypeFrameClaimed, Step: "start", CommandID: "c1", LoopID: "l1", Frame: 1 << 40,
				WorkerID: "w-ü", Payload: []byte(`{"rows":[{"key":"1","values":{"id":1}}]}`)},
			{ExecutionID: id, Type: eventlog.TypeStepStarted, Step: "ünïcode ✓"},
		},
		{{ExecutionID: id, Type: eventlog.TypeFrameDone, CommandID: "c1", Payload: []byte(big), Time: at.Add(-time.Hour * 24 * 365 * 40)}},
		// A command.issued on record: the lean statement stores nothing,
		// the general one reports it a duplicate and stores the rest.
		{
			{ExecutionID: id, Type: eventlog.TypeCommandIssued, CommandID: "c1", Payload: []byte(`{}`)},
			{ExecutionID: id, Type: eventlog.TypeCommandIssued, CommandID: "c2", Payload: []byte(`{}`), Time: at},
		},
	}
	var results [2][][]eventlog.Result
	for i, l := range logs {
		for _, b := range batches {
			res, err := l.Append(ctx, b)
			if err != nil {
				t.Fatalf("log %d: Append: %v", i, err)
			}
			results[i] = append(results[i], res)
		}
	}
	if !preparedDirect(t, direct) {
		t.Fatal("the direct pool's connection holds no prepared lean append: its batches did not take the direct path")
	}
	if preparedDirect(t, viaPgx) {
		t.Fatal("a pool in exec mode prepared the lean append by name")
	}
	if got := results[0][3]; len(got) != 2 || !got[0].Duplicate || got[1].Duplicate || got[1].Seq != 6 {
		t.Fatalf("batch with a recorded command.issued: %+v; want c1 a duplicate, c2 stored at seq 6", got)
	}
	for k := range results[0] {
		for j := range results[0][k] {
			a, b := results[0][k][j], results[1][k][j]
			if a.Seq != b.Seq || a.Duplicate != b.Duplicate {
				t.Fatalf("batch %d event %d: direct %+v, pgx %+v", k, j, a, b)
			}
		}
	}
	var read [2][]eventlog.Event
	for i, l := range logs {
		evs, err := l.Read(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		read[i] = evs
	}
	if len(read[0]) != 6 || len(read[1]) != 6 {
		t.Fatalf("read %d and %d events; want 6 each", len(read[0]), len(read[1]))
	}
	for j := range read[0] {
		a, b := read[0][j], read[1][j]
		same := a.Seq == b.Seq && a.Type == b.Type && a.Step == b.Step && a.CommandID == b.CommandID &&
			a.LoopID == b.LoopID && a.Frame == b.Frame && a.Attempt == b.Attempt && a.WorkerID == b.WorkerID &&
			string(a.Payload) == string(b.Payload) && string(a.Meta) == string(b.Meta) && (a.Payload == nil) == (b.Payload == nil)
		if !same {
			t.Fatalf("event %d differs:\ndirect %+v\npgx    %+v", j, a, b)
		}
		// Times given are stored to the microsecond on both paths; a
		// zero time (events 2 and 3) is each append's now.
		if j != 2 && j != 3 {
			if !a.Time.Equal(b.Time) {
				t.Fatalf("event %d: time %v direct, %v pgx", j, a.Time, b.Time)
			}
		} else if a.Time.IsZero() || time.Since(a.Time) > time.Minute {
			t.Fatalf("event %d: a zero time stored as %v; want the append's now", j, a.Time)
		}
	}
	if want := at.Truncate(time.Microsecond); !read[0][1].Time.Equal(want) {
		t.Fatalf("time stored as %v; want %v", read[0][1].Time, want)
	}
	if string(read[0][4].Payload) != big {
		t.Fatalf("the %d-byte payload came back as %d bytes", len(big), len(read[0][4].Payload))
	}
}

// TestDirectAppendIsAtomic sends a lean batch the server refuses (a step
// that is not UTF-8): nothing of it is stored, and the next append takes
// the seqs it would have.
func TestDirectAppendIsAtomic(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := modePool(t, pgx.QueryExecModeCacheStatement, 1)
	l := newLog(t, pool, randomSchema(t, pool))
	id := logtest.ExecutionID("atomic")
	if _, err := l.Append(ctx, []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeExecutionStarted}}); err != nil {
		t.Fatal(err)
	}
	_, err := l.Append(ctx, []eventlog.Event{
		{ExecutionID: id, Type: eventlog.TypeCommandIssued, CommandID: "c1"},
		{ExecutionID: id, Type: eventlog.TypeStepStarted, Step: "bad\xff"},
	})
	if err == nil {
		t.Fatal("Append of a step that is not UTF-8 succeeded")
	}
	if !preparedDirect(t, pool) {
		t.Fatal("the refused batch did not take the direct path")
	}
	res, err := l.Append(ctx, []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeCommandIssued, CommandID: "c1"}})
	if err != nil || res[0].Duplicate || res[0].Seq != 2 {
		t.Fatalf("append after the refused batch = %+v, %v; want c1 stored at seq 2", res, err)
	}
}

// TestDirectAppendSurvivesAChangedTable changes the type of the column
// the lean statement returns after it was prepared (as a later release's
// migration might, under a process still running): the server refuses
// the prepared statement from then on, so the append drops it and goes
// through pgx, and every later append too, stored and numbered as before.
func TestDirectAppendSurvivesAChangedTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tr := &prepareCounter{}
	pool := modePool(t, pgx.QueryExecModeCacheStatement, 1, tr)
	schema := randomSchema(t, pool)
	l := newLog(t, pool, schema)
	id := logtest.ExecutionID("changed")
	for _, b := range [][]eventlog.Event{
		{{ExecutionID: id, Type: eventlog.TypeExecutionStarted}},
		{{ExecutionID: id, Type: eventlog.TypeCommandIssued, CommandID: "c1"}},
	} {
		if _, err := l.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if !preparedDirect(t, pool) {
		t.Fatal("the lean batch did not take the direct path")
	}
	if _, err := pool.Exec(ctx, "ALTER TABLE "+pgx.Identifier{schema, "events"}.Sanitize()+" ALTER COLUMN seq TYPE numeric"); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range []string{"c2", "c3"} {
		res, err := l.Append(ctx, []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeCommandIssued, CommandID: cmd}})
		if err != nil || res[0].Seq != int64(3+i) {
			t.Fatalf("append %s after the change = %+v, %v; want seq %d", cmd, res, err, 3+i)
		}
	}
	evs, err := l.Read(ctx, id, 0, 0)
	if err != nil || len(evs) != 4 || evs[3].CommandID != "c3" {
		t.Fatalf("Read = %d events, %v; want 4 ending with c3", len(evs), err)
	}
	// The statement refused was dropped and prepared again, once: kept,
	// every append would have sent it first to be refused once more.
	if got := tr.fresh.Load(); got != 2 {
		t.Fatalf("the lean append was prepared %d times; want 2, before and after the change", got)
	}
}

// prepareCounter counts the lean append's prepares that reached the
// server (not answered from the connection's cache).
type prepareCounter struct{ fresh atomic.Int64 }

func (*prepareCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (*prepareCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (*prepareCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	return context.WithValue(ctx, prepareName{}, d.Name)
}
func (p *prepareCounter) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	if name, _ := ctx.Value(prepareName{}).(string); strings.HasPrefix(name, "cursorflow_append_plain_") && !d.AlreadyPrepared && d.Err == nil {
		p.fresh.Add(1)
	}
}

type prepareName struct{}

// TestDirectAppendRunsTheGuard appends lean batches through guarded views
// of a log (as a leader's lease check guards its orchestrator's): the
// guard runs first in the same transaction, prepared like the append. A
// guard that raises refuses the batch whole, with its own error, and so
// it does for a batch the lean statement hands to the general one (a
// recorded command.issued).
func TestDirectAppendRunsTheGuard(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := modePool(t, pgx.QueryExecModeCacheStatement, 1)
	schema := randomSchema(t, pool)
	l := newLog(t, pool, schema)
	fn := pgx.Identifier{schema, "assert_holder"}.Sanitize()
	if _, err := pool.Exec(ctx, `CREATE FUNCTION `+fn+`(holder text, token bigint) RETURNS void LANGUAGE plpgsql AS $$
		BEGIN
			IF holder <> 'leader' OR token <> 7 THEN
				RAISE EXCEPTION 'not the leader' USING ERRCODE = 'CF001';
			END IF;
		END $$`); err != nil {
		t.Fatal(err)
	}
	guard := func(holder string) eventlog.Log {
		return l.WithAppendGuard(postgres.AppendGuard{SQL: "SELECT " + fn + "($1, $2)", Args: []any{holder, int64(7)}})
	}
	leader, deposed := guard("leader"), guard("other")
	id := logtest.ExecutionID("guarded")
	if _, err := l.Append(ctx, []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeExecutionStarted}}); err != nil {
		t.Fatal(err)
	}
	issued := func(cmd string) []eventlog.Event {
		return []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeCommandIssued, CommandID: cmd, Payload: []byte(`{}`)}}
	}
	refused := func(what string, err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "CF001" {
			t.Fatalf("%s through the deposed view: %v; want the guard's CF001", what, err)
		}
	}
	if res, err := leader.Append(ctx, issued("c1")); err != nil || res[0].Seq != 2 {
		t.Fatalf("leader's append = %+v, %v; want seq 2", res, err)
	}
	var names []string
	rows, err := pool.Query(ctx, "SELECT name FROM pg_prepared_statements WHERE name LIKE 'cursorflow_append_%' ORDER BY name")
	if err == nil {
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(names) != 2 || !strings.HasPrefix(names[0], "cursorflow_append_guard_") || !strings.HasPrefix(names[1], "cursorflow_append_plain_") {
		t.Fatalf("prepared %v, %v; want the guard and the lean append: the guarded batch did not take the direct path", names, err)
	}
	_, err = deposed.Append(ctx, issued("c2"))
	refused("a new command", err)
	_, err = deposed.Append(ctx, issued("c1"))
	refused("a recorded command", err)
	if res, err := leader.Append(ctx, issued("c1")); err != nil || !res[0].Duplicate {
		t.Fatalf("leader's append of a recorded command = %+v, %v; want a duplicate", res, err)
	}
	if res, err := leader.Append(ctx, issued("c2")); err != nil || res[0].Seq != 3 {
		t.Fatalf("leader's append after the refusals = %+v, %v; want seq 3: a refused batch stored something", res, err)
	}
}
