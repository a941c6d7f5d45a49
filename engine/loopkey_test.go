package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/noop"
)

// loopIDs is a sqlite cursor driver that records the LoopID of every
// cursor it opens, and of every loop run it is told is over
// (cursor.Finisher), with whether log held the run's loop.done by then.
type loopIDs struct {
	*sqlitedriver.Driver
	log      eventlog.Log
	mu       sync.Mutex
	ids      map[string]bool
	finished map[string]bool
}

func (d *loopIDs) Finish(ctx context.Context, spec cursor.Spec) error {
	exec, run, _ := strings.Cut(spec.LoopID, "/")
	evs, err := d.log.Read(ctx, exec, 0, 0)
	if err != nil {
		return err
	}
	done := false
	for _, ev := range evs {
		done = done || (ev.Type == eventlog.TypeLoopDone && ev.LoopID == run)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, again := d.finished[spec.LoopID]; again {
		return fmt.Errorf("loop run %s finished twice", spec.LoopID)
	}
	d.finished[spec.LoopID] = done
	return nil
}

func (d *loopIDs) finishedRuns() map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.finished)
}

func (d *loopIDs) Open(ctx context.Context, spec cursor.Spec) (cursor.Cursor, error) {
	d.mu.Lock()
	d.ids[spec.LoopID] = true
	d.mu.Unlock()
	return d.Driver.Open(ctx, spec)
}

func (d *loopIDs) seen() map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]bool{}
	for k := range d.ids {
		out[k] = true
	}
	return out
}

// TestCursorLoopIDIsTheRun: a cursor driver sees a loop run as its
// execution's id and its run id, so that two executions of a playbook
// never share a default consumer group or durable, and is told the run
// is over (cursor.Finisher) once its loop.done is recorded; an execution
// recorded before that rule, resumed, keeps the run id its frames had,
// and its driver is never told to drop what that id names, which every
// such execution of the playbook shares.
func TestCursorLoopIDIsTheRun(t *testing.T) {
	t.Parallel()
	_, queue := sqlitetest.Queue(t, `CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT NOT NULL DEFAULT 'pending');
		INSERT INTO jobs (id) VALUES (1), (2), (3), (4), (5), (6)`)
	src := header + `
workflow:
  - step: start
    loop:
      cursor:
        kind: sqlite
        auth: q
        claim: |
          UPDATE jobs SET status = 'done' WHERE id IN
            (SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 3) RETURNING id
      iterator: job
      spec: {mode: cursor, max_in_flight: 1, frame: {max_rows: 3, process: frame}}
    tool: {kind: noop}
`
	newEngine := func(log eventlog.Log) (*engine.Engine, *loopIDs) {
		d := &loopIDs{Driver: sqlitedriver.New(sqlitedriver.Config{}), log: log, ids: map[string]bool{}, finished: map[string]bool{}}
		creg := cursor.NewRegistry()
		if err := creg.Register("sqlite", d); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = creg.Close() })
		treg := tools.NewRegistry()
		treg.MustRegister("noop", noop.New())
		e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg,
			Keychain: tools.StaticURLs(map[string]string{"q": queue}), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e, d
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	log := eventlog.NewMemory()
	e, d := newEngine(log)
	id, err := e.Start(ctx, []byte(src), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := e.Wait(ctx, id); err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("run: %v %+v", err, sum)
	}
	if got := d.seen(); len(got) != 1 || !got[id+"/start#1"] {
		t.Fatalf("loop ids %v, want only %s/start#1", got, id)
	}
	if err := e.Shutdown(ctx); err != nil { // lets the Finish calls end
		t.Fatal(err)
	}
	if got := d.finishedRuns(); !reflect.DeepEqual(got, map[string]bool{id + "/start#1": true}) {
		t.Fatalf("finished loop runs (true: after loop.done) %v, want %s/start#1 after its loop.done", got, id)
	}

	// The same execution's start as a log written before the rule holds
	// it (no semantics 3), resumed on a fresh log.
	evs, err := log.Read(ctx, id, 0, 1)
	if err != nil || len(evs) != 1 || evs[0].Type != eventlog.TypeExecutionStarted {
		t.Fatalf("read start: %v %v", err, evs)
	}
	var started map[string]any
	if err := json.Unmarshal(evs[0].Payload, &started); err != nil {
		t.Fatal(err)
	}
	started["semantics"] = 2
	old := evs[0]
	old.ExecutionID, old.Seq, old.ID = "old-execution", 0, 0
	if old.Payload, err = json.Marshal(started); err != nil {
		t.Fatal(err)
	}
	oldLog := eventlog.NewMemory()
	if _, err := oldLog.Append(ctx, []eventlog.Event{old}); err != nil {
		t.Fatal(err)
	}
	e2, d2 := newEngine(oldLog)
	if err := e2.Resume(ctx, "old-execution"); err != nil {
		t.Fatal(err)
	}
	if sum, err := e2.Wait(ctx, "old-execution"); err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("resume: %v %+v", err, sum)
	}
	if got := d2.seen(); len(got) != 1 || !got["start#1"] {
		t.Fatalf("resumed old execution's loop ids %v, want only start#1", got)
	}
	if err := e2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d2.finishedRuns(); len(got) != 0 {
		t.Fatalf("the old execution's shared loop runs %v were finished, want none", got)
	}
}
