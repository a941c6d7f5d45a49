package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	if ids, err := l.Executions(ctx, eventlog.ExecutionsQuery{Unfinished: true}); err != nil || len(ids) != 1 || ids[0] != exec {
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

// TestReadOnlyFollowsAWriter: a log opened read-only beside a writer that
// holds it (a status while the run goes on) sees the writer's appends,
// and its Wait wakes for them.
func TestReadOnlyFollowsAWriter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	w := open(t, path, sqlite.Config{})
	exec := logtest.ExecutionID("follow")
	if _, err := w.Append(ctx, []eventlog.Event{{ExecutionID: exec, Type: eventlog.TypeExecutionStarted}}); err != nil {
		t.Fatal(err)
	}
	r := open(t, path, sqlite.Config{ReadOnly: true, PollInterval: 10 * time.Millisecond})
	if _, err := w.Append(ctx, []eventlog.Event{{ExecutionID: exec, Type: eventlog.TypeCommandIssued, CommandID: "c1"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx, exec, 1); err != nil {
		t.Fatal(err)
	}
	if evs, err := r.Read(ctx, exec, 0, 0); err != nil || len(evs) != 2 {
		t.Fatalf("Read = %+v, %v: want the writer's 2 events", evs, err)
	}
}

// TestReadOnlyOpenNeedsALog: read-only, a missing file is ErrNoLog and
// is not created, and a file that holds no log is refused, naming it.
func TestReadOnlyOpenNeedsALog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	_, err := sqlite.Open(t.Context(), missing, sqlite.Config{ReadOnly: true})
	if !errors.Is(err, eventlog.ErrNoLog) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("read-only Open of a missing file: %v: want ErrNoLog naming %s", err, missing)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only Open created %s: %v", missing, err)
	}
	other := filepath.Join(dir, "other.db")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(t.Context(), other, sqlite.Config{ReadOnly: true})
	if !errors.Is(err, eventlog.ErrNoLog) || !strings.Contains(err.Error(), other) {
		t.Fatalf("read-only Open of an empty file: %v: want ErrNoLog naming %s", err, other)
	}
}
