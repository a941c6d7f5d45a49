package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/eventlog"
)

// ErrStandby is what an Orchestrator's Start and Cancel return (wrapped)
// while another replica leads. It wraps api.ErrUnavailable, so the API
// answers 503 and a load balancer retries on the leader.
var ErrStandby = fmt.Errorf("%w: this replica is a standby; retry on the leader", api.ErrUnavailable)

// Dispatcher carries one term's commands to workers in other processes
// and their reports back. *natsjs.Dispatcher is one.
type Dispatcher interface {
	engine.Dispatcher
	// Serve hands the workers' reports to rep until ctx is done.
	Serve(ctx context.Context, rep engine.Reporter) error
	// Close stops publishing; the engine is closed first.
	Close() error
}

// OrchestratorConfig configures an Orchestrator.
type OrchestratorConfig struct {
	// Lease decides when this replica leads. Required.
	Lease *Lease
	// Log is the shared event log. Required. Each term's engine appends
	// through Lease.Fence(Log), so nothing is appended once the lease may
	// be lost.
	Log eventlog.Log
	// Engine is the template of each term's engine: its Log and
	// Dispatcher are set by the Orchestrator, everything else (Tools,
	// Workers, CommandLease, Observer, Logger, ...) is used as given.
	Engine engine.Config
	// NewDispatcher, if set, opens the transport of a term (for example
	// natsjs.NewDispatcher): the term's engine is orchestrator-only
	// (Engine.Workers is ignored) and the workers' reports are served
	// once every unfinished execution is loaded. Without it the term's
	// engine runs commands on its own Engine.Workers in-process workers.
	NewDispatcher func(ctx context.Context) (Dispatcher, error)
	// WrapDispatcher, if set, wraps each term's dispatcher before the
	// engine sees it, for example otelobserve.Observer.WrapDispatcher to
	// carry trace context to the workers.
	WrapDispatcher func(engine.Dispatcher) engine.Dispatcher
	// Projection, if set, is refreshed every RefreshEvery while this
	// replica leads: every unfinished execution's status is brought up to
	// date and its snapshots saved, so status questions here (pass the
	// same Projection to api.Config) and, through the snapshots, on other
	// replicas have little left to fold.
	Projection *engine.Projection
	// RefreshEvery is how often Projection is refreshed. Defaults to
	// DefaultRefreshEvery (10s).
	RefreshEvery time.Duration
	// Logger receives the terms' starts and ends. Defaults to
	// Engine.Logger, then slog.Default().
	Logger *slog.Logger
}

// DefaultRefreshEvery is OrchestratorConfig.RefreshEvery's default.
const DefaultRefreshEvery = 10 * time.Second

// Orchestrator leads while its replica holds the lease: for each term it
// builds an engine on the fenced log, resumes every unfinished execution
// of the log, and (with a transport) serves the workers' reports, until
// the lease may be lost; then it closes the engine before campaigning
// again. Between terms, and on standby replicas, Start and Cancel return
// ErrStandby.
//
// It implements api.Runner: pass it as api.Config.Engine, and its Ready
// as api.Config.Ready, so only the leader reports ready.
type Orchestrator struct {
	cfg OrchestratorConfig
	log *slog.Logger

	mu   sync.Mutex
	e    *engine.Engine
	term context.Context
}

var _ api.Runner = (*Orchestrator)(nil)

// NewOrchestrator checks cfg and returns an Orchestrator; Run starts it.
func NewOrchestrator(cfg OrchestratorConfig) (*Orchestrator, error) {
	if cfg.Lease == nil {
		return nil, errors.New("leader: OrchestratorConfig.Lease is required")
	}
	if cfg.Log == nil {
		return nil, errors.New("leader: OrchestratorConfig.Log is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = cfg.Engine.Logger
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RefreshEvery <= 0 {
		cfg.RefreshEvery = DefaultRefreshEvery
	}
	return &Orchestrator{cfg: cfg, log: cfg.Logger}, nil
}

// Run campaigns for the lease and leads whenever it is held, until ctx is
// done; then it releases a held lease so a standby takes over at once.
func (o *Orchestrator) Run(ctx context.Context) error {
	return o.cfg.Lease.Run(ctx, func(lctx context.Context) {
		if err := o.lead(lctx); err != nil && lctx.Err() == nil {
			o.log.Error("leader: leading failed; stepping down", "error", err)
		}
	})
}

// lead drives every execution for one term. It returns once lctx is done
// (or the transport failed) and the engine is closed, so nothing appends
// on this replica's behalf after.
func (o *Orchestrator) lead(lctx context.Context) error {
	fenced := o.cfg.Lease.Fence(o.cfg.Log)
	if fenced == nil {
		return errors.New("lease lost before the engine started")
	}
	cfg := o.cfg.Engine
	cfg.Log = fenced
	var d Dispatcher
	if o.cfg.NewDispatcher != nil {
		var err error
		if d, err = o.cfg.NewDispatcher(lctx); err != nil {
			return fmt.Errorf("open the transport: %w", err)
		}
		// Closed after the engine (deferred first): nothing is dispatched
		// once it is closed.
		defer d.Close()
		cfg.Workers, cfg.Dispatcher = 0, d
	}
	if o.cfg.WrapDispatcher != nil && cfg.Dispatcher != nil {
		cfg.Dispatcher = o.cfg.WrapDispatcher(cfg.Dispatcher)
	}
	e, err := engine.New(cfg)
	if err != nil {
		return err
	}
	defer e.Close()

	ids, err := o.cfg.Log.Executions(lctx, eventlog.ExecutionsQuery{Unfinished: true})
	if err != nil {
		return fmt.Errorf("list unfinished executions: %w", err)
	}
	resumed := 0
	for _, id := range ids {
		if err := e.Resume(lctx, id); err != nil {
			if lctx.Err() != nil {
				return nil
			}
			o.log.Error("leader: cannot resume execution", "execution_id", id, "error", err)
			continue
		}
		resumed++
	}
	o.log.Info("leader: leading", "owner", o.cfg.Lease.Owner(), "resumed", resumed)

	// Reports are consumed only once every unfinished execution is loaded:
	// a report for an execution the engine does not drive is dropped as
	// stale.
	served := make(chan error, 1)
	sctx, stopServe := context.WithCancel(lctx)
	defer stopServe()
	if d != nil {
		go func() { served <- d.Serve(sctx, e.Reporter()) }()
	}
	o.setLeader(lctx, e)
	defer o.clearLeader()
	if o.cfg.Projection != nil {
		rctx, stopRefresh := context.WithCancel(lctx)
		refreshed := make(chan struct{})
		go func() { defer close(refreshed); o.refresh(rctx) }()
		defer func() { stopRefresh(); <-refreshed }()
	}

	select {
	case <-lctx.Done():
	case err := <-served:
		return fmt.Errorf("report consumer stopped: %w", err)
	}
	o.clearLeader()
	_ = e.Close()
	stopServe()
	if d != nil {
		// Serve was cancelled on purpose; its result cannot change the
		// step-down, and the lease is gone either way.
		<-served //nolint:errcheck // only Serve's return is awaited
	}
	return nil
}

// refresh keeps the projection current until ctx is done.
func (o *Orchestrator) refresh(ctx context.Context) {
	t := time.NewTicker(o.cfg.RefreshEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := o.cfg.Projection.Refresh(ctx); err != nil && ctx.Err() == nil {
				o.log.Warn("leader: projection refresh failed", "error", err)
			}
		}
	}
}

func (o *Orchestrator) setLeader(term context.Context, e *engine.Engine) {
	o.mu.Lock()
	o.e, o.term = e, term
	o.mu.Unlock()
}

func (o *Orchestrator) clearLeader() {
	o.mu.Lock()
	o.e, o.term = nil, nil
	o.mu.Unlock()
}

// Leading reports whether this replica drives executions now.
func (o *Orchestrator) Leading() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.e != nil && o.term.Err() == nil
}

// Ready returns nil while this replica leads and ErrStandby otherwise;
// it fits api.Config.Ready.
func (o *Orchestrator) Ready(context.Context) error {
	if !o.Leading() {
		return ErrStandby
	}
	return nil
}

// engine returns the term's engine and a context that ends with ctx or
// with the term, whichever comes first.
func (o *Orchestrator) engine(ctx context.Context) (*engine.Engine, context.Context, context.CancelFunc, error) {
	o.mu.Lock()
	e, term := o.e, o.term
	o.mu.Unlock()
	if e == nil || term.Err() != nil {
		return nil, nil, nil, ErrStandby
	}
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(term, cancel)
	return e, cctx, func() { stop(); cancel() }, nil
}

// Start implements api.Runner: it starts an execution on the leader's
// engine. When leadership is lost while the start is under way it
// returns an error wrapping api.ErrUnavailable, with the execution's id
// if the engine had taken the start (the next leader resumes it if it
// was recorded).
func (o *Orchestrator) Start(ctx context.Context, src []byte, opts engine.StartOptions) (string, error) {
	e, cctx, done, err := o.engine(ctx)
	if err != nil {
		return "", err
	}
	defer done()
	id, err := e.Start(cctx, src, opts)
	if err != nil && cctx.Err() != nil && ctx.Err() == nil {
		// With an id the start was taken and may be on record: the next
		// leader resumes it. The caller gets the id to look it up.
		return id, fmt.Errorf("%w: leadership lost while starting", api.ErrUnavailable)
	}
	return id, err
}

// Cancel implements api.Runner.
func (o *Orchestrator) Cancel(ctx context.Context, executionID string) error {
	e, cctx, done, err := o.engine(ctx)
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

// Wait waits for an execution this replica drives to end, like
// engine.Engine.Wait; it returns ErrStandby on a standby.
func (o *Orchestrator) Wait(ctx context.Context, executionID string) (*engine.Summary, error) {
	e, cctx, done, err := o.engine(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return e.Wait(cctx, executionID)
}
