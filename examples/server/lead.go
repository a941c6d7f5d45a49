package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/engine/leader"
)

// lead drives every execution while this replica holds the lease: an
// orchestrator-only engine whose appends are fenced by the lease, a NATS
// dispatcher, the resume of every unfinished execution, and then the
// consumer of the workers' reports. It returns once lctx is done and the
// engine is closed, so nothing appends on this replica's behalf after.
func lead(lctx context.Context, o options, logger *slog.Logger, log eventlog.Log, lease *leader.Lease,
	transport natsjs.Config, r *runner) error {
	fenced := lease.Fence(log)
	if fenced == nil {
		return fmt.Errorf("lease lost before the engine started")
	}
	d, err := natsjs.NewDispatcher(lctx, transport)
	if err != nil {
		return err
	}
	defer d.Close()
	cfg := engine.Config{Log: fenced, Workers: 0, Dispatcher: d, CommandLease: o.commandLease, Logger: logger}
	if o.observer != nil {
		cfg.Observer = o.observer
		cfg.Dispatcher = o.observer.WrapDispatcher(d)
	}
	e, err := engine.New(cfg)
	if err != nil {
		return err
	}
	// Close the engine first: it stops deciding and appending; then the
	// report consumer (its in-flight reports are redelivered to the next
	// leader) and the publisher.
	defer e.Close()

	ids, err := log.Executions(lctx, true)
	if err != nil {
		return fmt.Errorf("list unfinished executions: %w", err)
	}
	resumed := 0
	for _, id := range ids {
		if err := e.Resume(lctx, id); err != nil {
			if lctx.Err() != nil {
				return nil
			}
			logger.Error("cannot resume execution", "execution_id", id, "error", err)
			continue
		}
		resumed++
	}
	logger.Info("leading", "replica", lease.Owner(), "resumed", resumed)

	// Reports are consumed only once every unfinished execution is loaded:
	// a report for an execution the engine does not drive is dropped as
	// stale.
	sctx, stopServe := context.WithCancel(lctx)
	served := make(chan error, 1)
	go func() { served <- d.Serve(sctx, e.Reporter()) }()
	r.setLeader(lctx, e)
	defer r.clearLeader()

	select {
	case <-lctx.Done():
	case err := <-served:
		stopServe()
		return fmt.Errorf("report consumer stopped: %w", err)
	}
	r.clearLeader()
	_ = e.Close()
	stopServe()
	// Serve was cancelled on purpose; its result cannot change the
	// step-down, and the lease is gone either way.
	<-served //nolint:errcheck // only Serve's return is awaited, see above
	return nil
}

// runner is the API's api.Runner: the leader's engine, or 503 on a
// standby.
type runner struct {
	mu   sync.Mutex
	e    *engine.Engine
	term context.Context
}

var _ api.Runner = (*runner)(nil)

// setLeader makes e, driven for the leader's term, the engine requests run
// on.
func (r *runner) setLeader(term context.Context, e *engine.Engine) {
	r.mu.Lock()
	r.e, r.term = e, term
	r.mu.Unlock()
}

// clearLeader turns this replica back into a standby.
func (r *runner) clearLeader() {
	r.mu.Lock()
	r.e, r.term = nil, nil
	r.mu.Unlock()
}

func (r *runner) leading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.e != nil && r.term.Err() == nil
}

// engine returns the engine and a context that ends with the request or
// with the leader's term, whichever comes first.
func (r *runner) engine(ctx context.Context) (*engine.Engine, context.Context, context.CancelFunc, error) {
	r.mu.Lock()
	e, term := r.e, r.term
	r.mu.Unlock()
	if e == nil || term.Err() != nil {
		return nil, nil, nil, fmt.Errorf("%w: this replica is a standby; retry on the leader", api.ErrUnavailable)
	}
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(term, cancel)
	return e, cctx, func() { stop(); cancel() }, nil
}

// Start implements api.Runner.
func (r *runner) Start(ctx context.Context, src []byte, opts engine.StartOptions) (string, error) {
	e, cctx, done, err := r.engine(ctx)
	if err != nil {
		return "", err
	}
	defer done()
	id, err := e.Start(cctx, src, opts)
	if err != nil && cctx.Err() != nil && ctx.Err() == nil {
		return "", fmt.Errorf("%w: leadership lost while starting", api.ErrUnavailable)
	}
	return id, err
}

// Cancel implements api.Runner.
func (r *runner) Cancel(ctx context.Context, executionID string) error {
	e, cctx, done, err := r.engine(ctx)
	if err != nil {
		return err
	}
	defer done()
	err = e.Cancel(cctx, executionID)
	if err != nil && cctx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("%w: leadership lost while cancelling", api.ErrUnavailable)
	}
	return err
}
