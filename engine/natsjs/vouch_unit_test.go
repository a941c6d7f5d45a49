package natsjs

import (
	"context"
	"log/slog"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// reporterOnly is an engine.Reporter that cannot vouch.
type reporterOnly struct{}

func (reporterOnly) Report(context.Context, eventlog.Event) error    { return nil }
func (reporterOnly) Heartbeat(context.Context, string, string) error { return nil }

// voucher answers every Vouch with err and counts them.
type voucher struct {
	reporterOnly
	err   error
	calls int
}

func (v *voucher) Vouch(context.Context, string, string) error { v.calls++; return v.err }

// TestVouchConfirmsRunVerdicts: a staleness check's verdict to run or to
// settle a cancel holds only when the engine vouches for the attempt; one
// it refuses, or does not answer for in time, is stale. The other
// verdicts, and a Reporter that cannot vouch, leave the table's word.
func TestVouchConfirmsRunVerdicts(t *testing.T) {
	d := &Dispatcher{log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	for _, c := range []struct {
		err        error
		v, want    string
		wantCalled bool
	}{
		{nil, checkRun, checkRun, true},
		{nil, checkCancelled, checkCancelled, true},
		{engine.ErrStale, checkRun, verdictStale, true},
		{engine.ErrStale, checkCancelled, verdictStale, true},
		{context.DeadlineExceeded, checkRun, verdictStale, true},
		{engine.ErrStale, checkClaimed, checkClaimed, false},
		{engine.ErrStale, checkUnknown, checkUnknown, false},
		{nil, verdictStale, verdictStale, false},
	} {
		vr := &voucher{err: c.err}
		if got := d.vouch(ctx, vr, "e", "c@1", c.v); got != c.want || (vr.calls > 0) != c.wantCalled {
			t.Errorf("verdict %s, engine %v: %s after %d vouches, want %s (asked: %v)", c.v, c.err, got, vr.calls, c.want, c.wantCalled)
		}
	}
	if got := d.vouch(ctx, reporterOnly{}, "e", "c@1", checkRun); got != checkRun {
		t.Errorf("a Reporter that cannot vouch: %s, want the table's %s", got, checkRun)
	}
}
