package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// testPool returns a pool on the test database, closed on cleanup.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// randomSchema returns a fresh schema name that is dropped on cleanup.
func randomSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	return randomSchemaEnding(t, pool, "")
}

// randomSchemaEnding is randomSchema with suffix at the end of the name.
func randomSchemaEnding(t testing.TB, pool *pgxpool.Pool, suffix string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "eventlog_test_" + hex.EncodeToString(b[:]) + suffix
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

func newLog(t testing.TB, pool *pgxpool.Pool, schema string) *postgres.Log {
	t.Helper()
	l, err := postgres.New(context.Background(), pool, postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestConformance(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	// A host's pool (New) runs the statements with PostgreSQL's default
	// plan caching; Open forces generic plans. Both must behave the same.
	t.Run("New", func(t *testing.T) {
		t.Parallel()
		logtest.Run(t, func(t *testing.T) eventlog.Log {
			return newLog(t, pool, randomSchema(t, pool))
		})
	})
	t.Run("Open", func(t *testing.T) {
		t.Parallel()
		dsn := testenv.Postgres(t)
		logtest.Run(t, func(t *testing.T) eventlog.Log {
			l, err := postgres.Open(t.Context(), dsn, postgres.Config{Schema: randomSchema(t, pool)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l
		})
	})
	// Pools in pgx's other modes append through pgx, not the direct path;
	// those that do not prepare statements (exec and simple protocol, as
	// behind a pooler in transaction mode) send parameters typed by their
	// Go types.
	for _, mode := range []pgx.QueryExecMode{
		pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol,
		pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec,
	} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			pool := modePool(t, mode, 0)
			logtest.Run(t, func(t *testing.T) eventlog.Log {
				return newLog(t, pool, randomSchema(t, pool))
			})
		})
	}
}

func TestReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := testenv.Postgres(t)
	schema := randomSchema(t, testPool(t))
	exec := logtest.ExecutionID("reopen")

	l, err := postgres.Open(ctx, dsn, postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, []eventlog.Event{
		{ExecutionID: exec, Type: eventlog.TypeExecutionStarted},
		{ExecutionID: exec, Type: eventlog.TypeCommandIssued, CommandID: "c1"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A second Open finds the schema migrated and the history intact.
	l, err = postgres.Open(ctx, dsn, postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	res, err := l.Append(ctx, []eventlog.Event{
		{ExecutionID: exec, Type: eventlog.TypeCommandIssued, CommandID: "c1"},
		{ExecutionID: exec, Type: eventlog.TypeStepStarted},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || res[1].Seq != 3 {
		t.Fatalf("after reopen: %+v, want the duplicate detected and seq 3", res)
	}
	evs, err := l.Read(ctx, exec, 0, 0)
	if err != nil || len(evs) != 3 || evs[1].CommandID != "c1" {
		t.Fatalf("Read after reopen = %+v, %v", evs, err)
	}
}

// Logs on separate pools stand for separate processes: concurrent
// migrations are serialized, appends interleave without gaps, duplicates
// are caught across them, and Wait on one is woken by NOTIFY from another.
func TestTwoProcesses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := randomSchema(t, testPool(t))
	logs := make([]*postgres.Log, 3)
	errs := make(chan error, len(logs))
	for i := range logs {
		go func() {
			var err error
			logs[i], err = postgres.New(ctx, testPool(t), postgres.Config{Schema: schema, PollInterval: time.Hour})
			errs <- err
		}()
	}
	for range logs {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent New: %v", err)
		}
	}
	for _, l := range logs {
		t.Cleanup(func() { _ = l.Close() })
	}
	// PollInterval is an hour: only the notification can wake a Wait.
	logtest.RunShared(t, []eventlog.Log{logs[0], logs[1], logs[2]}, 30)
}

// A batch the server rejects half-way (a text column refuses bytes that
// are not UTF-8, which eventlog.Validate lets through) leaves nothing
// behind: not its events, not its executions rows, not a seq.
func TestAppendAtomicOnServerError(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testPool(t)
	schema := randomSchema(t, pool)
	l := newLog(t, pool, schema)
	known, fresh := logtest.ExecutionID("known"), logtest.ExecutionID("fresh")
	if _, err := l.Append(ctx, []eventlog.Event{{ExecutionID: known, Type: eventlog.TypeExecutionStarted}}); err != nil {
		t.Fatal(err)
	}
	_, err := l.Append(ctx, []eventlog.Event{
		{ExecutionID: fresh, Type: eventlog.TypeExecutionStarted},
		{ExecutionID: known, Type: eventlog.TypeCommandIssued, CommandID: "c1"},
		{ExecutionID: known, Type: eventlog.TypeStepStarted, Step: "bad\xff"},
	})
	if err == nil {
		t.Fatal("Append of a step that is not UTF-8 succeeded")
	}
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema}.Sanitize()+".executions WHERE execution_id = $1",
		fresh).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("executions rows for the failed batch's new execution = %d, %v; want 0", rows, err)
	}
	res, err := l.Append(ctx, []eventlog.Event{{ExecutionID: known, Type: eventlog.TypeCommandIssued, CommandID: "c1"}})
	if err != nil || res[0].Duplicate || res[0].Seq != 2 {
		t.Fatalf("append after the failed batch = %+v, %v; want c1 stored at seq 2", res, err)
	}
	if evs, err := l.Read(ctx, fresh, 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("Read(fresh) = %d events, %v", len(evs), err)
	}
}
