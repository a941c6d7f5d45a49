package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/eventlog"
)

// TestVouchTakesTheAttempt: a transport checks a command message it may
// hold a stale copy of (delivered again, or left waiting) just before the
// lease of the attempt, which no worker took, runs out. The engine vouches
// for the attempt and renews its lease in the same step, as a first
// heartbeat would: the command is re-issued only after missed heartbeats,
// as an attempt a worker took (reason lease), not at the untaken lease's
// end. Once re-issued, the old attempt is refused (ErrStale), the new one
// vouched for; an execution the engine does not drive is refused.
func TestVouchTakesTheAttempt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := eventlog.NewMemory()
	d := newHeldDispatcher()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const lease = time.Minute
	e := testEngine(t, Config{Log: log, Dispatcher: d, Clock: clk, CommandLease: lease, Tick: time.Second})
	id, err := e.Start(ctx, []byte("workflow:\n  - step: start\n    tool: {kind: ok}\n"), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := d.wait(ctx, t, 1)[0]
	clk.Advance(lease - time.Second)
	if err := e.Reporter().(Voucher).Vouch(ctx, id, first.ID); err != nil {
		t.Fatalf("vouch for the current attempt: %v", err)
	}
	// Past the untaken lease's end, then past three missed heartbeats.
	clk.Advance(2 * time.Second)
	clk.Advance(3 * lease / 10)
	second := d.wait(ctx, t, 2)[1]
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var reason string
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued && ev.CommandID == second.ID {
			var p issuedPayload
			if err := decode(ev, &p); err != nil {
				t.Fatal(err)
			}
			reason = p.Reason
		}
	}
	if reason != reasonLease {
		t.Errorf("re-issued for %q, want %q: the vouch took the attempt", reason, reasonLease)
	}
	if err := e.Reporter().(Voucher).Vouch(ctx, id, first.ID); !errors.Is(err, ErrStale) {
		t.Errorf("vouch for the re-issued attempt: %v, want ErrStale", err)
	}
	if err := e.Reporter().(Voucher).Vouch(ctx, id, second.ID); err != nil {
		t.Errorf("vouch for the new attempt: %v", err)
	}
	if err := e.Reporter().(Voucher).Vouch(ctx, "no-such-execution", second.ID); !errors.Is(err, ErrStale) {
		t.Errorf("vouch for an execution not driven here: %v, want ErrStale", err)
	}
}
