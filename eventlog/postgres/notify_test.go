package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// Appends notify other processes once they have committed, one
// notification per execution and round, not one per append: with an
// hour's NotifyInterval, the first append is announced at once, the next
// five (four to one execution) wait for Close, which announces each
// execution once. A NOTIFY inside every append would have sent six.
func TestNotifiesOncePerRoundAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testPool(t)
	schema := randomSchema(t, pool)
	l, err := postgres.New(ctx, pool, postgres.Config{Schema: schema, NotifyInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = l.Close()
		}
	})

	listener, err := pgx.Connect(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = listener.Close(context.Background()) })
	channel := pgx.Identifier{schema + ".events"}.Sanitize()
	if _, err := listener.Exec(ctx, "LISTEN "+channel); err != nil {
		t.Fatal(err)
	}
	// next returns the next notification's payload.
	next := func() string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		n, err := listener.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("waiting for a notification: %v", err)
		}
		return n.Payload
	}
	appendOK := func(evs ...eventlog.Event) {
		t.Helper()
		if _, err := l.Append(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}

	e1, e2 := logtest.ExecutionID("one"), logtest.ExecutionID("two")
	appendOK(eventlog.Event{ExecutionID: e1, Type: eventlog.TypeExecutionStarted})
	if got := next(); got != e1 {
		t.Fatalf("first notification = %q, want %q: an idle log notifies at once", got, e1)
	}
	// The listener saw e1's round, so that round took nothing else: what
	// follows waits for the next one, an hour away, or Close.
	appendOK(eventlog.Event{ExecutionID: e2, Type: eventlog.TypeExecutionStarted})
	for _, c := range []string{"a", "b", "c"} {
		appendOK(eventlog.Event{ExecutionID: e2, Type: eventlog.TypeCommandIssued, CommandID: c})
	}
	appendOK(eventlog.Event{ExecutionID: e1, Type: eventlog.TypeCommandIssued, CommandID: "a"})
	// The events are readable before any notification announces them.
	if evs, err := l.Read(ctx, e2, 0, 0); err != nil || len(evs) != 4 {
		t.Fatalf("Read(e2) = %d events, %v; want 4", len(evs), err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	// Notifications arrive in commit order: everything Close sent comes
	// before this one.
	if _, err := pool.Exec(ctx, "SELECT pg_notify($1, 'end')", schema+".events"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for p := next(); p != "end"; p = next() {
		got = append(got, p)
	}
	if len(got) != 2 || got[0] == got[1] || (got[0] != e1 && got[0] != e2) || (got[1] != e1 && got[1] != e2) {
		t.Fatalf("notifications after the first = %q, want %q and %q once each (sent by Close)", got, e1, e2)
	}
}
