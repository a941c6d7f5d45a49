package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/eventlog"
)

// localQueue is the in-process transport: an unbounded FIFO of commands
// that this engine's worker goroutines drain. Unbounded so the
// orchestrator never blocks on dispatch while workers wait on it to record
// their reports.
type localQueue struct {
	mu    sync.Mutex
	cond  chan struct{}
	items []*Command
	// latest is the newest attempt queued of each command still queued.
	// An attempt whose lease ran out while every worker was busy is
	// re-issued, uncounted, once per lease (reasonUntaken); the older
	// attempts still queued are superseded and dropped when their turn
	// comes, so the work runs once, not once per lease it waited.
	latest map[queuedCommand]int
	// cancel tells this engine's workers of a cancel (Worker.Cancel).
	cancel func(executionID string)
	// stopped is closed by close: workers take nothing more.
	stopped   chan struct{}
	closeOnce sync.Once
}

// queuedCommand names a command (all its attempts) in the local queue.
type queuedCommand struct{ execution, base string }

func newLocalQueue() *localQueue {
	return &localQueue{cond: make(chan struct{}, 1), stopped: make(chan struct{}), latest: map[queuedCommand]int{}}
}

// close makes next return false from now on: the commands still queued
// stay issued in the log, for a resume to run.
func (q *localQueue) close() { q.closeOnce.Do(func() { close(q.stopped) }) }

// Dispatch implements Dispatcher.
func (q *localQueue) Dispatch(cmd *Command) {
	q.mu.Lock()
	q.items = append(q.items, cmd)
	if k := (queuedCommand{cmd.ExecutionID, cmd.Base}); cmd.Attempt > q.latest[k] {
		q.latest[k] = cmd.Attempt
	}
	q.mu.Unlock()
	select {
	case q.cond <- struct{}{}:
	default:
	}
}

// Durable implements Dispatcher: commands queued in memory die with the
// process.
func (q *localQueue) Durable() bool { return false }

// Cancel implements Dispatcher: the workers are in this process.
func (q *localQueue) Cancel(executionID string) { q.cancel(executionID) }

func (q *localQueue) next(ctx context.Context) (*Command, bool) {
	for {
		select {
		case <-q.stopped:
			return nil, false
		default:
		}
		q.mu.Lock()
		if len(q.items) > 0 {
			cmd := q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			k := queuedCommand{cmd.ExecutionID, cmd.Base}
			if latest := q.latest[k]; cmd.Attempt < latest {
				// Superseded while queued: its reports would be refused,
				// but its body would run.
				q.mu.Unlock()
				continue
			} else if cmd.Attempt == latest {
				delete(q.latest, k)
			}
			more := len(q.items) > 0
			q.mu.Unlock()
			if more {
				select {
				case q.cond <- struct{}{}:
				default:
				}
			}
			return cmd, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-q.stopped:
			return nil, false
		case <-q.cond:
		}
	}
}

// retryingReporter is the in-process workers' Reporter: a report the
// orchestrator could not record now (ErrUnavailable: the log failed, the
// execution is being reloaded) is sent again with backoff until it is
// recorded or refused for good, so a worker's outcome is never dropped
// on a transient failure.
type retryingReporter struct {
	rep    Reporter
	clock  clock.Clock
	logger *slog.Logger
}

// Report backoff bounds.
const (
	minReportBackoff = 10 * time.Millisecond
	maxReportBackoff = 5 * time.Second
)

func (r *retryingReporter) Report(ctx context.Context, ev eventlog.Event) error {
	return r.retry(ctx, ev, func() error { return r.rep.Report(ctx, ev) })
}

// retry calls send, the sending of ev, until the orchestrator records it
// or refuses it for good.
func (r *retryingReporter) retry(ctx context.Context, ev eventlog.Event, send func() error) error {
	backoff := minReportBackoff
	for attempt := 1; ; attempt++ {
		err := send()
		if err == nil || !errors.Is(err, ErrUnavailable) {
			return err
		}
		// The first time at warn; the outage behind it is the
		// orchestrator's to say (once), so the rest go to debug.
		level := slog.LevelWarn
		if attempt > 1 {
			level = slog.LevelDebug
		}
		r.logger.Log(ctx, level, "report not recorded; sending it again", "execution_id", ev.ExecutionID, "command_id", ev.CommandID,
			"type", ev.Type, "attempt", attempt, "retry_in", backoff, "error", err)
		t := r.clock.NewTimer(backoff)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		backoff = min(backoff*2, maxReportBackoff)
	}
}

// MayChain implements ChainReporter: as the reporter it wraps.
func (r *retryingReporter) MayChain() bool {
	cr, ok := r.rep.(ChainReporter)
	return ok && cr.MayChain()
}

// ReportChained is retried as Report is, the worker holding its claim
// ahead meanwhile: the append that failed may have stored the report (it
// failed after its commit), and then only the report sent again gets the
// recorded next frame to this worker, which holds its rows. Given up
// instead, that frame would wait out its lease with nobody running it.
func (r *retryingReporter) ReportChained(ctx context.Context, done eventlog.Event, claimed json.RawMessage) (*Command, error) {
	cr, ok := r.rep.(ChainReporter)
	if !ok {
		return nil, errNoChain
	}
	var next *Command
	err := r.retry(ctx, done, func() (err error) {
		next, err = cr.ReportChained(ctx, done, claimed)
		return err
	})
	return next, err
}

// errNoChain: the reporter cannot record a claim ahead; the worker reports
// the frame.done alone.
var errNoChain = errors.New("engine: the reporter cannot chain frames")

func (r *retryingReporter) Heartbeat(ctx context.Context, executionID, commandID string) error {
	return r.rep.Heartbeat(ctx, executionID, commandID)
}
