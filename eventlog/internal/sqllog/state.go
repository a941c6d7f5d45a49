package sqllog

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/internal/notify"
)

// State is a log's open/closed state and the hub its waiters sleep on.
// The zero value is an open log.
type State struct {
	notify.Hub

	closed    atomic.Bool
	initDone  sync.Once
	done      chan struct{}
	closeOnce sync.Once
}

func (s *State) doneChan() chan struct{} {
	s.initDone.Do(func() { s.done = make(chan struct{}) })
	return s.done
}

// Closed reports whether Close has been called.
func (s *State) Closed() bool { return s.closed.Load() }

// Done returns a channel closed by Close.
func (s *State) Done() <-chan struct{} { return s.doneChan() }

// Close marks the log closed and wakes every Wait with eventlog.ErrClosed.
// Calls after the first do nothing.
func (s *State) Close() {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.doneChan())
	})
}

// CheckAppend runs the checks every Append starts with: the log is open,
// ctx is live and the batch is valid. When it returns stop == true, Append
// returns results and err as they are (an empty batch yields an empty,
// non-nil result slice); otherwise it goes on to store the batch.
func (s *State) CheckAppend(ctx context.Context, events []eventlog.Event) (results []eventlog.Result, stop bool, err error) {
	if s.Closed() {
		return nil, true, eventlog.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, true, err
	}
	if err := eventlog.ValidateBatch(events); err != nil {
		return nil, true, err
	}
	if len(events) == 0 {
		return []eventlog.Result{}, true, nil
	}
	return nil, false, nil
}

// OpErr maps the error of an operation op of the backend named backend
// ("postgres", "sqlite"): eventlog.ErrClosed once the log is closed, the
// context's error when it ended the operation, else err wrapped.
func (s *State) OpErr(ctx context.Context, backend, op string, err error) error {
	if s.Closed() {
		return eventlog.ErrClosed
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return &opError{msg: fmt.Sprintf("%s eventlog: %s: %v", backend, op, err), err: err}
}

// opError is an operation's error: its message names the backend and
// the operation, and it wraps both the backend's error and
// eventlog.ErrUnavailable.
type opError struct {
	msg string
	err error
}

func (e *opError) Error() string   { return e.msg }
func (e *opError) Unwrap() []error { return []error{e.err, eventlog.ErrUnavailable} }

// Wait implements eventlog.Log's Wait on top of lastSeq, which returns the
// execution's highest stored seq (0 if none): it returns once that exceeds
// afterSeq, re-reading whenever the hub is notified for executionID and at
// least every poll interval, and fails with ctx's error or, once the log
// is closed, eventlog.ErrClosed.
func (s *State) Wait(ctx context.Context, executionID string, afterSeq int64, poll time.Duration,
	lastSeq func(ctx context.Context, executionID string) (int64, error)) error {
	done := s.Done()
	var timer *time.Timer
	for {
		if s.Closed() {
			return eventlog.ErrClosed
		}
		woken, release := s.Subscribe(executionID)
		last, err := lastSeq(ctx, executionID)
		if err != nil || last > afterSeq {
			release()
			return err
		}
		if timer == nil {
			timer = time.NewTimer(poll)
			defer timer.Stop()
		} else {
			timer.Reset(poll)
		}
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
			release()
			return ctx.Err()
		case <-done:
			release()
			return eventlog.ErrClosed
		}
		release()
	}
}
