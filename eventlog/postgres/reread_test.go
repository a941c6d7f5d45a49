package postgres_test

import (
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestReadsRideOutKilledSessions: the server ends the log's idle sessions
// (a failover, pg_terminate_backend), which the pool still holds. Every
// read through the log (Read, Wait, Executions, LoadSnapshot) still
// answers: it runs once more on a new session. An append is not repeated
// this way (it may have committed); the engine reloads instead.
func TestReadsRideOutKilledSessions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testPool(t)
	app := "cf_reread_" + testenv.RandomSuffix(t)
	l, err := postgres.Open(ctx, testenv.WithAppName(testenv.Postgres(t), app), postgres.Config{Schema: randomSchema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	id := logtest.ExecutionID("reread")
	if _, err := l.Append(ctx, []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeExecutionStarted}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SaveSnapshot(ctx, eventlog.Snapshot{ExecutionID: id, Format: "f", Seq: 1, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// kill ends the log's sessions and waits until they are gone.
	kill := func() {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("the log held no session to end")
		}
		for {
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatal("the ended sessions did not go")
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	for _, op := range []struct {
		name string
		run  func() error
	}{
		{"Read", func() error {
			evs, err := l.Read(ctx, id, 0, 0)
			if err == nil && len(evs) != 1 {
				t.Errorf("Read returned %d events, want 1", len(evs))
			}
			return err
		}},
		{"Wait", func() error { return l.Wait(ctx, id, 0) }},
		{"Executions", func() error {
			ids, err := l.Executions(ctx, eventlog.ExecutionsQuery{})
			if err == nil && (len(ids) != 1 || ids[0] != id) {
				t.Errorf("Executions = %v, want [%s]", ids, id)
			}
			return err
		}},
		{"Executions after", func() error {
			_, err := l.Executions(ctx, eventlog.ExecutionsQuery{After: id})
			return err
		}},
		{"LoadSnapshot", func() error {
			snap, err := l.LoadSnapshot(ctx, id, "f")
			if err == nil && snap.Seq != 1 {
				t.Errorf("LoadSnapshot = %+v", snap)
			}
			return err
		}},
	} {
		kill()
		if err := op.run(); err != nil {
			t.Errorf("%s after the log's sessions were ended: %v", op.name, err)
		}
	}
}
