package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
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
	// kill ends the log's sessions and waits until they are gone. Only
	// those: once Wait has run, the log's listener connects again by
	// itself, a new session under the same name.
	kill := func() {
		t.Helper()
		var pids []int32
		if err := pool.QueryRow(ctx, "SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity WHERE application_name = $1", app).Scan(&pids); err != nil {
			t.Fatal(err)
		}
		if len(pids) == 0 {
			t.Fatal("the log held no session to end")
		}
		if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", pids); err != nil {
			t.Fatal(err)
		}
		for {
			var n int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)", pids).Scan(&n); err != nil {
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

// TestReadCutMidStreamIsReadOnce: the connection drops while a read's
// rows stream in, the client holding part of them. The read runs again
// on a new session and hands back each event, and each execution, once:
// what the cut attempt had read is not kept beside the second's.
func TestReadCutMidStreamIsReadOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	proxy, viaProxy := testenv.NewURLProxy(t, testenv.Postgres(t))
	// One pooled session: the executions' listing runs on the session
	// whose reply to the first query (the After id's) the proxy counts.
	l, err := postgres.Open(ctx, viaProxy+"&pool_max_conns=1", postgres.Config{Schema: randomSchema(t, testPool(t))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })

	id := logtest.ExecutionID("cut")
	events := []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeExecutionStarted}}
	payload := []byte(`{"pad": "` + strings.Repeat("x", 1000) + `"}`)
	for i := range 299 {
		events = append(events, eventlog.Event{ExecutionID: id, Type: eventlog.TypeStepCompleted, Step: fmt.Sprint("s", i), Payload: payload})
	}
	if _, err := l.Append(ctx, events); err != nil {
		t.Fatal(err)
	}
	var others []eventlog.Event
	for i := range 3000 {
		others = append(others, eventlog.Event{ExecutionID: fmt.Sprintf("%s-other-%04d", id, i), Type: eventlog.TypeExecutionStarted})
	}
	for chunk := range slices.Chunk(others, 500) {
		if _, err := l.Append(ctx, chunk); err != nil {
			t.Fatal(err)
		}
	}

	// The read's reply is about 300 KB: cut after 64 KB of it.
	lost := proxy.LoseReplyAfter([]byte(id), 64<<10)
	got, err := l.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatalf("Read cut mid-stream: %v", err)
	}
	select {
	case <-lost:
	default:
		t.Fatal("the read's reply was not cut")
	}
	if len(got) != len(events) {
		t.Errorf("Read returned %d events, want %d", len(got), len(events))
	}
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}

	// The listing after id: its first query names id, and its page of
	// 3,000 ids (about 100 KB) is cut after 20 KB.
	lost = proxy.LoseReplyAfter([]byte(id), 20<<10)
	ids, err := l.Executions(ctx, eventlog.ExecutionsQuery{After: id})
	if err != nil {
		t.Fatalf("Executions cut mid-stream: %v", err)
	}
	select {
	case <-lost:
	default:
		t.Fatal("the listing's reply was not cut")
	}
	if len(ids) != len(others) {
		t.Errorf("Executions returned %d ids, want %d", len(ids), len(others))
	}
	for i, x := range ids {
		if x != others[i].ExecutionID {
			t.Fatalf("id %d is %s, want %s", i, x, others[i].ExecutionID)
		}
	}
}
