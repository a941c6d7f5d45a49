package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/tools"
)

// Defaults of Config.
const (
	DefaultWorkers      = 32
	DefaultCommandLease = time.Minute
	DefaultTick         = 50 * time.Millisecond
	DefaultMaxBatch     = 512
)

// Config configures an Engine.
type Config struct {
	// Log is the event log, the only authority on every execution.
	// Required.
	Log eventlog.Log
	// Tools resolves tool kinds. Defaults to an empty registry, so every
	// step fails naming its unregistered kind: hosts register what they
	// use (tools/builtin registers the standard tools).
	Tools *tools.Registry
	// Cursors resolves cursor kinds for cursor loops. Defaults to an empty
	// registry.
	Cursors *cursor.Registry
	// Keychain resolves credential aliases on the worker. Defaults to one
	// that knows no alias.
	Keychain tools.Keychain
	// Workers is the number of in-process workers (commands run at once).
	// Defaults to 32. Zero workers with a Dispatcher of your own runs the
	// orchestrator only (scale-out).
	Workers int
	// Dispatcher hands commands to workers elsewhere. Defaults to the
	// in-process transport feeding this engine's own workers.
	Dispatcher Dispatcher
	// CommandLease is how long a step or item command may go without a
	// heartbeat before it is re-issued; cursor frames use the loop's
	// lease_seconds. Defaults to 1 minute.
	CommandLease time.Duration
	// Tick is how often leases and scheduled retries are checked.
	// Defaults to 50ms.
	Tick time.Duration
	// MaxBatch bounds the worker reports folded into one append.
	// Defaults to 512.
	MaxBatch int
	// WorkerID names this process's workers in events. Defaults to a
	// random id.
	WorkerID string
	// Logger receives the engine's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Clock returns the current time. Defaults to time.Now.
	Clock func() time.Time
	// Results, when set, is where results (and loop aggregates) larger
	// than its threshold go: events and commands carry a reference
	// ({uri, size, sha256}) and templates read the stored value. Nil
	// keeps every result inline in the log. Every process of a deployment
	// (orchestrators, workers) must use the same store. The engine does
	// not close it.
	Results *resultstore.Store
	// Partials bounds the partial results (call.partial events) the
	// tools of one command hand on while they run; see PartialLimits for
	// the defaults.
	Partials PartialLimits
	// Observer, if set, sees every event once it is durably appended, in
	// append order, from the orchestrator's goroutine: metrics and traces
	// derive from the log itself. It must not block.
	Observer Observer
}

// Observer sees appended events (see Config.Observer).
type Observer interface {
	Observe(ev eventlog.Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ev eventlog.Event)

// Observe calls f.
func (f ObserverFunc) Observe(ev eventlog.Event) { f(ev) }

// Engine runs playbook executions: an orchestrator that folds and decides
// over the event log, and (unless Workers is 0) in-process workers.
type Engine struct {
	cfg Config
	// checkTools and checkCursors say whether Start checks tool and cursor
	// kinds against the registries: when this engine runs workers itself,
	// or the host gave the registry.
	checkTools   bool
	checkCursors bool
	orch         *orchestrator
	running      running
	worker       *Worker
	queue        *localQueue
	cancel       context.CancelFunc
	wg           sync.WaitGroup
	closed       bool
	mu           sync.Mutex
	// busy counts the commands the in-process workers run; started is
	// when the engine started (both for Workers).
	busy    atomic.Int64
	started time.Time
}

// New creates an engine and starts its orchestrator and workers. Close
// stops them.
func New(cfg Config) (*Engine, error) {
	if cfg.Log == nil {
		return nil, errors.New("engine: Config.Log is required")
	}
	hostTools, hostCursors := cfg.Tools != nil, cfg.Cursors != nil
	if cfg.Tools == nil {
		cfg.Tools = tools.NewRegistry()
	}
	if cfg.Cursors == nil {
		cfg.Cursors = cursor.NewRegistry()
	}
	if cfg.Keychain == nil {
		cfg.Keychain = tools.StaticKeychain{}
	}
	if cfg.Workers == 0 && cfg.Dispatcher == nil {
		cfg.Workers = DefaultWorkers
	}
	if cfg.CommandLease <= 0 {
		cfg.CommandLease = DefaultCommandLease
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = "w-" + uuid.NewString()[:8]
	}
	e := &Engine{cfg: cfg, started: cfg.Clock()}
	inProcess := cfg.Dispatcher == nil && cfg.Workers > 0
	e.checkTools, e.checkCursors = hostTools || inProcess, hostCursors || inProcess
	res := newResults(cfg.Results)
	e.worker = &Worker{ID: cfg.WorkerID, Tools: cfg.Tools, Cursors: cfg.Cursors, Keychain: cfg.Keychain, Logger: cfg.Logger,
		Partials: cfg.Partials, Results: cfg.Results, res: res}
	dispatch := cfg.Dispatcher
	if dispatch == nil {
		e.queue = newLocalQueue()
		dispatch = e.queue
	}
	e.orch = &orchestrator{
		log: cfg.Log, dispatch: dispatch, clock: cfg.Clock, logger: cfg.Logger,
		lease: cfg.CommandLease, tick: cfg.Tick, maxBatch: cfg.MaxBatch, observer: cfg.Observer,
		inbox: make(chan message, cfg.MaxBatch), execs: map[string]*execution{}, res: res,
		finished: map[string]*Summary{}, waiters: map[string]chan struct{}{},
		// An execution that ended failed or cancelled stops the commands
		// this process still runs for it.
		onFinish: e.running.cancelAll,
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.orch.run(ctx) }()
	if e.queue != nil {
		for i := 0; i < cfg.Workers; i++ {
			e.wg.Add(1)
			go func() { defer e.wg.Done(); e.work(ctx) }()
		}
	}
	return e, nil
}

// work is one in-process worker goroutine.
func (e *Engine) work(ctx context.Context) {
	for {
		cmd, ok := e.queue.next(ctx)
		if !ok {
			return
		}
		e.execute(ctx, cmd)
	}
}

func (e *Engine) execute(ctx context.Context, cmd *Command) {
	e.busy.Add(1)
	defer e.busy.Add(-1)
	ctx, cancel := context.WithCancel(ctx)
	e.running.add(cmd.ExecutionID, cmd.ID, cancel)
	defer e.running.remove(cmd.ExecutionID, cmd.ID)
	defer func() {
		if r := recover(); r != nil {
			// A tool that panics must not take the engine down: the
			// command fails with the panic recorded.
			e.cfg.Logger.Error("command panicked", "command_id", cmd.ID, "panic", r, "stack", string(debug.Stack()))
			_ = e.worker.report(ctx, e.orch, cmd, eventlog.TypeCommandFailed, completedPayload{Error: fmt.Sprintf("panic: %v", r)})
		}
	}()
	if err := e.worker.Execute(ctx, cmd, e.orch); err != nil && !errors.Is(err, context.Canceled) {
		e.cfg.Logger.Debug("report refused", "command_id", cmd.ID, "error", err)
	}
}

// Reporter returns the reporter workers of this engine's orchestrator use;
// a transport that runs workers elsewhere delivers their reports to it.
func (e *Engine) Reporter() Reporter { return e.orch }

// Worker returns the engine's worker runtime, for transports that feed
// it commands from elsewhere.
func (e *Engine) Worker() *Worker { return e.worker }

// StartOptions are the inputs of a new execution.
type StartOptions struct {
	// File names the playbook source in positions and events.
	File string
	// Workload overrides top-level workload keys.
	Workload map[string]any
	// ExecutionID fixes the new execution's id; defaults to a new UUIDv7.
	ExecutionID string
	// Parent is the parent execution of a sub-playbook.
	Parent string
}

// Start parses the playbook source and starts an execution of it. The
// source is recorded in execution.started, so the log alone suffices to
// resume the execution anywhere.
//
// A playbook that uses a field this build does not honour (see
// dsl.Fields), or a tool or cursor kind the engine's registries do not
// hold, is refused before anything is recorded: the error is an
// *UnsupportedError (errors.Is(err, ErrUnsupported)) naming each problem's
// file:line:col. Kinds are checked when the engine runs workers itself or
// the host gave Config.Tools / Config.Cursors.
func (e *Engine) Start(ctx context.Context, src []byte, opts StartOptions) (string, error) {
	pb, err := dsl.Parse(opts.File, src)
	if err != nil {
		return "", err
	}
	if probs := e.Check(pb); len(probs) > 0 {
		return "", &UnsupportedError{Problems: probs}
	}
	workload := map[string]any{}
	for k, v := range pb.Workload {
		workload[k] = v
	}
	for k, v := range opts.Workload {
		workload[k] = v
	}
	id := opts.ExecutionID
	if id == "" {
		u, err := uuid.NewV7()
		if err != nil {
			return "", err
		}
		id = u.String()
	}
	vars := map[string]any{}
	if len(pb.Vars) > 0 {
		scope := map[string]any{"workload": workload, "execution_id": id}
		for k, v := range workload {
			scope[k] = v
		}
		for name, v := range pb.Vars {
			x, err := v.Render(scope)
			if err != nil {
				return "", fmt.Errorf("engine: vars.%s: %w", name, err)
			}
			vars[name] = x
		}
	}
	ev := eventlog.Event{ExecutionID: id, Type: eventlog.TypeExecutionStarted,
		Payload: mustJSON(startedPayload{Playbook: string(src), File: opts.File, Workload: workload, Vars: vars, Parent: opts.Parent, Semantics: currentSemantics})}
	st := NewState(id)
	st.Playbook = pb
	if err := e.orch.send(ctx, message{kind: msgStart, ev: ev, state: st}); err != nil {
		return "", err
	}
	return id, nil
}

// Check lists what in pb this engine would refuse to start (see the
// package-level Check): refused fields, and kinds its registries lack.
func (e *Engine) Check(pb *dsl.Playbook) []dsl.Diagnostic {
	var treg *tools.Registry
	var creg *cursor.Registry
	if e.checkTools {
		treg = e.cfg.Tools
	}
	if e.checkCursors {
		creg = e.cfg.Cursors
	}
	probs := Check(pb, treg, creg)
	if e.cfg.Results == nil {
		probs = append(probs, needsStore(pb)...)
	}
	return probs
}

// Resume continues an execution that an earlier process left unfinished:
// it folds the execution's events and decides what is left. Commands that
// were in flight are re-issued (at once with the in-process transport,
// after their lease with a durable one).
func (e *Engine) Resume(ctx context.Context, executionID string) error {
	events, err := e.cfg.Log.Read(ctx, executionID, 0, 0)
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return fmt.Errorf("%w: %s has no events", ErrUnknownExecution, executionID)
	}
	st, err := Fold(executionID, events)
	if err != nil {
		return err
	}
	if st.Status != StatusRunning {
		e.orch.mu.Lock()
		e.orch.finished[executionID] = summarize(st)
		e.orch.mu.Unlock()
		return nil
	}
	return e.orch.send(ctx, message{kind: msgLoad, state: st})
}

// Cancel asks a running execution to stop; it ends cancelled, and the
// commands this process's workers still run for it have their context
// cancelled. Workers elsewhere finish their command; its report is refused.
func (e *Engine) Cancel(ctx context.Context, executionID string) error {
	return e.orch.send(ctx, message{kind: msgCancel, ev: eventlog.Event{ExecutionID: executionID, Type: eventlog.TypeCancelRequested}})
}

// Wait blocks until the execution ends (or ctx is done) and returns its
// summary.
func (e *Engine) Wait(ctx context.Context, executionID string) (*Summary, error) {
	o := e.orch
	o.mu.Lock()
	if s := o.finished[executionID]; s != nil {
		o.mu.Unlock()
		return s, nil
	}
	w := o.waiters[executionID]
	if w == nil {
		w = make(chan struct{})
		o.waiters[executionID] = w
	}
	o.mu.Unlock()
	select {
	case <-w:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.finished[executionID], nil
}

// Driving lists the executions this engine's orchestrator drives now.
func (e *Engine) Driving(ctx context.Context) ([]string, error) {
	var ids []string
	err := e.orch.send(ctx, message{kind: msgList, list: &ids})
	return ids, err
}

// Close stops the orchestrator and the workers. Running commands are
// cancelled; their executions can be resumed from the log.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
	return nil
}

// Summary describes an execution's outcome.
type Summary struct {
	ExecutionID string `json:"execution_id"`
	Status      string `json:"status"`
	// Steps maps each step that ran to the status of its last run.
	Steps map[string]string `json:"steps"`
	// Events is the number of events in the execution's history.
	Events int64 `json:"events"`
	// Step, Field and Error describe a failure.
	Step  string `json:"failed_step,omitempty"`
	Field string `json:"failed_field,omitempty"`
	Error string `json:"error,omitempty"`
	// Results holds each step's result.
	Results map[string]any `json:"-"`
}

func summarize(s *State) *Summary {
	sum := &Summary{ExecutionID: s.ExecutionID, Status: s.Status, Steps: map[string]string{}, Events: s.Events, Results: s.Results}
	best := map[string]int{}
	for _, r := range s.Runs {
		n := runNumber(r.ID)
		if n >= best[r.Step] {
			best[r.Step] = n
			sum.Steps[r.Step] = r.Status
		}
	}
	if s.Status == StatusFailed {
		sum.Step, sum.Field, sum.Error = s.Failure.Step, s.Failure.Field, s.Failure.Message
	}
	return sum
}

// runNumber returns n of a run id "step#n" (0 if malformed).
func runNumber(id string) int {
	i := strings.LastIndexByte(id, '#')
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil {
		return 0
	}
	return n
}

// running tracks the commands this process's workers are running, so an
// execution that ends (cancelled, failed) can stop its remaining work.
type running struct {
	mu sync.Mutex
	m  map[string]map[string]context.CancelFunc
}

func (r *running) add(execID, cmdID string, cancel context.CancelFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]map[string]context.CancelFunc{}
	}
	if r.m[execID] == nil {
		r.m[execID] = map[string]context.CancelFunc{}
	}
	r.m[execID][cmdID] = cancel
}

func (r *running) remove(execID, cmdID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cancel := r.m[execID][cmdID]; cancel != nil {
		cancel()
		delete(r.m[execID], cmdID)
		if len(r.m[execID]) == 0 {
			delete(r.m, execID)
		}
	}
}

// cancelAll cancels every command running for an execution.
func (r *running) cancelAll(execID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cancel := range r.m[execID] {
		cancel()
	}
}
