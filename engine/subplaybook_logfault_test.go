package engine_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/faultlog"
)

// childStart matches the appends that start a sub-playbook's execution
// (a child's id holds its parent's and a "/").
func childStart(c faultlog.Call) bool {
	for _, ev := range c.Events {
		if ev.Type == eventlog.TypeExecutionStarted && strings.Contains(ev.ExecutionID, "/") {
			return true
		}
	}
	return false
}

// TestSubPlaybookStartSurvivesLogFault: the event log fails the appends
// that start children (a dropped connection), before and after they
// reach the store. The calls start them again and the parent completes,
// each child run once. Before, the call failed with the log's transient
// error (ErrUnavailable) and failed the parent (found by a pass:
// pg_terminate_backend of a PostgreSQL log's sessions).
func TestSubPlaybookStartSurvivesLogFault(t *testing.T) {
	t.Parallel()
	for _, after := range []bool{false, true} {
		t.Run("after_commit="+strconv.FormatBool(after), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeChild(t, dir, doublingChild)
			fl := faultlog.New(eventlog.NewMemory())
			fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 3, Match: childStart, AfterCommit: after})
			e, rec := subEngine(t, fl, 4)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			id, err := e.Start(ctx, []byte(parentOfChildren("{{ range(6) | list }}")), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
			if err != nil {
				t.Fatal(err)
			}
			sum, err := e.Wait(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := fl.Read(ctx, id, 0, 0)
			defer dumpOnFail(t, evs)
			// Up to 3: one append may start several children, and a start
			// stored despite its fault is attached to, not appended again.
			if n := fl.Hits(faultlog.OpAppend); n == 0 {
				t.Fatal("no append of a child's start failed")
			}
			if sum.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", sum.Status, sum.Error)
			}
			for i := range 6 {
				if n := rec.count("child-" + strconv.Itoa(i)); n != 1 {
					t.Fatalf("child %d ran %d times", i, n)
				}
			}
		})
	}
}

// TestSubPlaybookStartAgainWhileReloading: a child's start whose append
// failed leaves the engine reloading the child from the log, and that
// read fails too (the log is still down), so the call's next start hears
// "already running here" while the log holds nothing to resume. That is
// no failure of the call either: it starts the child again once the
// engine has given up the failed start. Before, the call failed with
// ErrUnknownExecution ("has no events") and failed the parent.
func TestSubPlaybookStartAgainWhileReloading(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeChild(t, dir, doublingChild)
	fl := faultlog.New(eventlog.NewMemory())
	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 1, Match: childStart})
	// The child's reads: the call's own (1), Start's check that the id is
	// fresh (2), then, after the failed append, the engine's reload (3),
	// which fails.
	var mu sync.Mutex
	reads := 0
	fl.Inject(faultlog.Fault{Op: faultlog.OpRead, Match: func(c faultlog.Call) bool {
		if !strings.Contains(c.ExecutionID, "/") {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		reads++
		return reads == 3
	}})
	e, rec := subEngine(t, fl, 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := e.Start(ctx, []byte(parentOfChildren("{{ range(1) | list }}")), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if n := rec.count("child-0"); n != 1 {
		t.Fatalf("child ran %d times", n)
	}
}
