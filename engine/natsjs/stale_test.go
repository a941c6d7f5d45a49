package natsjs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/eventlog"
)

// watchCommands returns the commands published to the default pool from
// now on, as the stream receives them (a core subscription to the
// stream's subject sees every publication).
func watchCommands(t *testing.T, b *bundle) <-chan *engine.Command {
	t.Helper()
	ch := make(chan *engine.Command, 64)
	sub, err := b.cfg.Conn.Subscribe(b.cfg.Prefix+".cmd.default", func(m *nats.Msg) {
		cmd, err := engine.DecodeCommand(m.Data)
		if err != nil {
			t.Errorf("decode a published command: %v", err)
			return
		}
		select {
		case ch <- cmd:
		default:
			t.Errorf("more commands published than the test expects: %s", cmd.ID)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Flush so the subscription is in place before the test publishes.
	if err := b.cfg.Conn.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return ch
}

// awaitAttempt waits for the publication of attempt n of a command and
// returns it.
func awaitAttempt(ctx context.Context, t *testing.T, published <-chan *engine.Command, n int) *engine.Command {
	t.Helper()
	for {
		select {
		case cmd := <-published:
			if cmd.Attempt == n {
				return cmd
			}
		case <-ctx.Done():
			t.Fatalf("attempt %d was never published", n)
		}
	}
}

// commandOf returns the command id of the execution's last report of
// type typ ("" if none).
func commandOf(evs []eventlog.Event, typ string) string {
	id := ""
	for _, ev := range evs {
		if ev.Type == typ {
			id = ev.CommandID
		}
	}
	return id
}

// TestSupersededAttemptNeverRunsOnFirstDelivery: with no worker in the
// pool, the engine re-issues a command once per lease, and each attempt
// waits in the commands stream as a message of its own. The worker that
// comes back gets every one of them delivered for the first time; it must
// run the current attempt alone, not the superseded ones' bodies too
// (their reports would be refused as stale, but the work would be done).
func TestSupersededAttemptNeverRunsOnFirstDelivery(t *testing.T) {
	t.Parallel()
	// The lease is what the worker has to run the current attempt before
	// it too is re-issued (expiries of attempts nobody took fail nothing).
	const lease = time.Second
	b := setup(t, lease, 30*time.Second)
	published := watchCommands(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: rec, key: once}
`), engine.StartOptions{File: "t.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	// Attempts 1 and 2 expire unclaimed; 3 is the current one.
	current := awaitAttempt(ctx, t, published, 3)

	w, stop := b.worker(t, "w-back", "", time.Second)
	sum, err := b.eng.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("wait: %v %+v", err, sum)
	}
	stop() // every message handled: the counters are final
	evs, err := b.log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The current attempt when the worker came up was 3; a worker slower
	// to start than the lease (a loaded machine) finds a later one
	// current, and every attempt before it superseded.
	got := commandOf(evs, eventlog.TypeCommandCompleted)
	base, ran := natsjs.SplitID(got)
	if base != current.Base || ran < current.Attempt {
		t.Fatalf("completed by %q, want attempt %d of %s or a later one", got, current.Attempt, current.Base)
	}
	// A tool call knows its command's base id, not the attempt: the body
	// that ran once is the current attempt's because the superseded ones
	// were dropped unrun.
	if n := b.calls.count("once"); n != 1 {
		t.Errorf("the step's body ran %d times, want once", n)
	}
	st := w.Stats()
	if want := int64(ran - 1); st.Dropped.Load() != want || st.Aged.Load() < want || st.Redelivered.Load() != 0 {
		t.Errorf("dropped %d, aged %d, redelivered %d: want the %d attempts before %s dropped as aged on their first delivery",
			st.Dropped.Load(), st.Aged.Load(), st.Redelivered.Load(), want, got)
	}
}

// TestSupersededFrameAttemptsLeaveItsRowsAlone is the cursor loop whose
// workers were killed: a frame's rows are on record, its worker dies in
// the middle of them, and while no worker is up the engine re-issues the
// frame with those rows once per lease. The worker that comes back must
// run the rows once more, under the current attempt, not once per
// superseded attempt waiting in the stream.
func TestSupersededFrameAttemptsLeaveItsRowsAlone(t *testing.T) {
	t.Parallel()
	const n, maxRows = 6, 3
	b := setup(t, 0, 30*time.Second)
	b.calls.block = "job1" // the first worker dies running it
	b.calls.hang = make(chan struct{})
	q := newJobDB(t, n)
	published := watchCommands(t, b)
	_, kill := b.startWorker(t, "w1", natsjs.WorkerOptions{Worker: q.worker(b, "w1", nil), Concurrency: 1, Grace: time.Millisecond})
	// The dead worker's call ends when the test does (before the worker's
	// own cleanup, which waits for it).
	t.Cleanup(func() { close(b.calls.hang) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// lease_seconds is what the second worker has to start the current
	// attempt in; max_attempts leaves room for the expiries while no
	// worker is up.
	id := b.startBlocked(ctx, t, q.playbookFrame(1,
		fmt.Sprintf("{max_rows: %d, lease_seconds: 1, max_attempts: 10}", maxRows),
		"{kind: rec, key: 'job{{ iter.job.id }}'}"))
	// The worker stops fetching and heartbeating, and its call never
	// returns: to the engine, it died. (Its Run waits for the call.)
	go kill()
	before := map[int]int{}
	for i := 1; i <= n; i++ {
		before[i] = b.calls.count(fmt.Sprintf("job%d", i))
	}
	// The frame's attempt 2 expires with no worker up; 3 is current.
	current := awaitAttempt(ctx, t, published, 3)
	if len(current.Rows) != maxRows {
		t.Fatalf("attempt 3 carries %d rows, want the %d on record", len(current.Rows), maxRows)
	}

	w, stop := b.startWorker(t, "w2", natsjs.WorkerOptions{Worker: q.worker(b, "w2", nil), Concurrency: 4})
	sum, err := b.eng.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("wait: %v %+v", err, sum)
	}
	stop()
	for i := 1; i <= n; i++ {
		if ran := b.calls.count(fmt.Sprintf("job%d", i)) - before[i]; ran != 1 {
			t.Errorf("row %d ran %d times after the first worker died, want once", i, ran)
		}
	}
	// Attempt 1 died with the first worker; the second drops every later
	// one before the attempt it runs: 2 when it came up within the lease
	// of 3, more on a machine slow enough to let 3 expire too.
	evs, err := b.log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, ev := range evs {
		if base, n := natsjs.SplitID(ev.CommandID); ev.Type == eventlog.TypeFrameDone && base == current.Base {
			ran = max(ran, n)
		}
	}
	if ran < current.Attempt {
		t.Fatalf("the frame's rows reported under attempt %d, want %d or a later one", ran, current.Attempt)
	}
	if st := w.Stats(); st.Dropped.Load() != int64(ran-2) {
		t.Errorf("dropped %d, want attempts 2 to %d", st.Dropped.Load(), ran-1)
	}
	var left int
	if err := q.db.QueryRow(`SELECT count(*) FROM jobs WHERE status <> 'done'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d rows not done (%v)", left, err)
	}
}
