package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"
)

func open(t testing.TB, path string, cfg sqlite.Config) *sqlite.Log {
	t.Helper()
	l, err := sqlite.Open(context.Background(), path, cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestConformance(t *testing.T) {
	t.Parallel()
	logtest.Run(t, func(t *testing.T) eventlog.Log {
		return open(t, filepath.Join(t.TempDir(), "events.db"), sqlite.Config{})
	})
}

func TestReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	exec := logtest.ExecutionID("reopen")
	l := open(t, path, sqlite.Config{})
	if _, err := l.Append(ctx, []eventlog.Event{
		{ExecutionID: exec, Type: eventlog.TypeExecutionStarted},
		{ExecutionID: exec, Type: eventlog.TypeCommandIssued, CommandID: "c1"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = open(t, path, sqlite.Config{})
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
	if ids, err := l.Executions(ctx, true); err != nil || len(ids) != 1 || ids[0] != exec {
		t.Fatalf("Executions after reopen = %v, %v", ids, err)
	}
}

// Two Log values on one file stand for two processes; a Wait on one
// notices an append through the other by polling.
func TestTwoWriters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "events.db")
	a := open(t, path, sqlite.Config{PollInterval: 20 * time.Millisecond})
	b := open(t, path, sqlite.Config{PollInterval: 20 * time.Millisecond})
	logtest.RunShared(t, []eventlog.Log{a, b}, 50)
}

func TestOpenRejectsBadPath(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro"} {
		if l, err := sqlite.Open(t.Context(), p, sqlite.Config{}); err == nil {
			_ = l.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}
