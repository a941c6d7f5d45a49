package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// deadOnlyDriver's first claim finds nothing to run but one row to
// bury, which it moves to its dead letter in Commit (as s3prefix and
// clickhouse do); later claims find nothing.
type deadOnlyDriver struct {
	mu               sync.Mutex
	claims           int
	commits, aborts  int
	recordedAtCommit bool
	recorded         func(executionID string) bool
}

func (d *deadOnlyDriver) Open(_ context.Context, spec cursor.Spec) (cursor.Cursor, error) {
	exec, _, _ := strings.Cut(spec.LoopID, "/") // "<execution id>/<run id>"
	return deadOnlyCursor{d, exec}, nil
}

func (d *deadOnlyDriver) Features() cursor.Features {
	return cursor.Features{LeaseExpiry: true, NeedsAck: true, DeadLetter: true}
}

func (d *deadOnlyDriver) Close() error { return nil }

type deadOnlyCursor struct {
	d    *deadOnlyDriver
	exec string
}

func (c deadOnlyCursor) Claim(context.Context, int) (*cursor.Claim, error) {
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.claims++; d.claims > 1 {
		return cursor.NewClaim(nil, nil, nil), nil
	}
	claim := cursor.NewClaim(nil, func(context.Context) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.commits++
		d.recordedAtCommit = d.recorded(c.exec)
		return nil
	}, func(context.Context) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.aborts++
		return nil
	})
	claim.Dead = []cursor.Row{{Key: "x", Values: map[string]any{}}}
	return claim, nil
}

func (deadOnlyCursor) Ack(context.Context, []cursor.Row) error     { return nil }
func (deadOnlyCursor) Release(context.Context, []cursor.Row) error { return nil }
func (deadOnlyCursor) Close() error                                { return nil }

// TestDrainedClaimCommitsAfterRecord: a claim with no rows but a Dead row
// is committed once the frame.done that reports the row dead is recorded,
// so that a source burying in Commit never buries a row the log does not
// report; before, the engine settled no empty claim at all, and such a
// source had to bury in Claim.
func TestDrainedClaimCommitsAfterRecord(t *testing.T) {
	t.Parallel()
	log := eventlog.NewMemory()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	drv := &deadOnlyDriver{}
	drv.recorded = func(id string) bool {
		evs, err := log.Read(context.Background(), id, 0, 0)
		if err != nil {
			return false
		}
		for _, ev := range evs {
			if ev.Type != eventlog.TypeFrameDone {
				continue
			}
			var p struct {
				Items []struct{ Key, Outcome string } `json:"items"`
			}
			if json.Unmarshal(ev.Payload, &p) == nil {
				for _, it := range p.Items {
					if it.Key == "x" && it.Outcome == engine.OutcomeDead {
						return true
					}
				}
			}
		}
		return false
	}
	cursors := cursor.NewRegistry()
	_ = cursors.Register("deadonly", drv)
	reg := tools.NewRegistry()
	reg.MustRegister("rec", (&recorder{}).tool()) // never called: nothing runs
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Cursors: cursors, Tick: 5 * time.Millisecond,
		Keychain: tools.StaticURLs(map[string]string{"q": "deadonly://"})})
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      cursor: {kind: deadonly, auth: q}
      iterator: job
      spec: {mode: cursor, max_in_flight: 1}
    tool: {kind: rec, key: row}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("execution: %+v, %v; want completed", sum, err)
	}
	if err := e.Close(); err != nil { // waits for the worker to settle
		t.Fatal(err)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Loops) != 1 {
		t.Fatalf("loops %+v, want one", st.Loops)
	}
	for _, l := range st.Loops {
		if l.Dead != 1 {
			t.Fatalf("loop status %+v, want 1 row dead", l)
		}
	}
	drv.mu.Lock()
	defer drv.mu.Unlock()
	if drv.commits != 1 || drv.aborts != 0 || !drv.recordedAtCommit {
		t.Fatalf("drained claim with a dead row: %d commits (the frame.done on record then: %v), %d aborts; want one commit after the record",
			drv.commits, drv.recordedAtCommit, drv.aborts)
	}
}
