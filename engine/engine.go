package engine

import (
	"cmp"
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
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/cursorflow/cursorflow/clock"
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
	// DefaultMissedHeartbeats is Config.MissedHeartbeats' default.
	DefaultMissedHeartbeats = 3
	// DefaultMaxFinished is how many finished executions' summaries Wait
	// finds in memory; older ones it reads back from the log.
	DefaultMaxFinished = 1000
	// DefaultFinishedTTL is how long a finished execution's summary stays
	// in memory.
	DefaultFinishedTTL = 10 * time.Minute
	// DefaultMaxFinishedBytes bounds the results the kept summaries of
	// finished executions hold in memory.
	DefaultMaxFinishedBytes = 64 << 20
	// DefaultMaxResultBytes bounds the result one command reports.
	DefaultMaxResultBytes = 8 << 20
	// DefaultMaxLoopItems bounds the items of a collection loop.
	DefaultMaxLoopItems = 100_000
	// DefaultPlaybookCache is how many parsed playbooks an engine keeps.
	DefaultPlaybookCache = 256
)

// playbookCacheBytes bounds the sources of the playbooks an engine keeps
// parsed (Config.PlaybookCache) together; their parsed forms are some
// times larger. NoETL's PFT flow is 80 KB.
const playbookCacheBytes = 16 << 20

// Config configures an Engine. A numeric field left zero, or set
// negative, takes its default (Workers excepted: a negative count is an
// error).
type Config struct {
	// Log is the event log, the only authority on every execution.
	// Required.
	Log eventlog.Log
	// Tools resolves tool kinds. Defaults to an empty registry, so Start
	// (and Resume) refuses a playbook that uses any tool kind with an
	// *UnsupportedError naming it: hosts register what they use
	// (tools/builtin registers the standard tools).
	Tools *tools.Registry
	// Cursors resolves cursor kinds for cursor loops. Defaults to an empty
	// registry. The orchestrator uses it too: once a cursor loop run is
	// over (its loop.done recorded, or its execution ended), a driver that
	// implements cursor.Finisher drops what it kept in the source for the
	// run (the consumer group or durable consumer it named), in the
	// background; a scale-out orchestrator without the kind leaves that
	// to the source. The engine does not close it: close it
	// (cursor.Registry.Close, which closes the drivers' connection pools)
	// once the engine is closed.
	Cursors *cursor.Registry
	// Keychain resolves credential aliases on the worker, and for the
	// orchestrator's cursor.Finisher calls. Defaults to one that knows no
	// alias.
	Keychain tools.Keychain
	// AllowCursorURL lets a cursor block without auth name its source
	// with a url option (url: /path/queue.db, postgres://..., s3://...)
	// on this engine's in-process workers. Defaults to false: a cursor
	// loop with a url fails, saying to use auth: with a keychain alias.
	// Such a url is reached with the process's own rights: a sqlite path
	// opens (or creates) any file it can, and drivers send the
	// credentials of the environment (PGPASSWORD, ~/.pgpass, AWS_*) to
	// wherever the url points. Set it only where every playbook is the
	// operator's own, as the cursorflow CLI's local runs are.
	AllowCursorURL bool
	// Workers is the number of in-process workers (commands run at once).
	// Defaults to 32. Zero workers with a Dispatcher of your own runs the
	// orchestrator only (scale-out). Negative is refused by New.
	Workers int
	// Dispatcher hands commands to workers elsewhere. Defaults to the
	// in-process transport feeding this engine's own workers.
	Dispatcher Dispatcher
	// CommandLease is how long a step or item command may go without a
	// heartbeat before it is re-issued; cursor frames use the loop's
	// lease_seconds. Its workers heartbeat every
	// CommandLease/dsl.HeartbeatsPerLease (frames: heartbeat_seconds).
	// Defaults to 1 minute.
	CommandLease time.Duration
	// MissedHeartbeats is how many heartbeat intervals a command that has
	// heartbeated may then stay silent before it is re-issued (fenced: the
	// silent worker's late reports are refused); never longer than the
	// command's lease, which alone applies before the first heartbeat.
	// Defaults to DefaultMissedHeartbeats (3).
	MissedHeartbeats int
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
	// Clock is the time leases, heartbeats, scheduled retries and
	// backoffs run on. Defaults to clock.System(); tests pass a
	// *clock.Fake and advance it.
	Clock clock.Clock
	// MaxFinished bounds the finished executions whose summaries are kept
	// in memory for Wait. Defaults to DefaultMaxFinished (1000).
	MaxFinished int
	// FinishedTTL bounds how long a finished execution's summary is kept
	// in memory. Defaults to DefaultFinishedTTL (10 minutes). Wait reads
	// an evicted summary back from the log.
	FinishedTTL time.Duration
	// MaxFinishedBytes bounds the step results the kept summaries hold
	// (their strings' bytes, and a few bytes more per value): a
	// thousand executions with megabytes of results each would otherwise
	// stay in memory. The oldest summaries go first; Wait reads an evicted
	// one back from the log. Defaults to DefaultMaxFinishedBytes (64 MiB).
	MaxFinishedBytes int64
	// MaxResultBytes bounds the encoded result one command reports, once
	// its parts over the result store's threshold went to Results (when
	// set): a larger one fails the command with an error that says so.
	// Defaults to DefaultMaxResultBytes (8 MiB).
	MaxResultBytes int
	// MaxLoopItems bounds the items a collection loop's in renders to: a
	// longer collection fails the step (a cursor loop has no such bound).
	// Defaults to DefaultMaxLoopItems (100,000).
	MaxLoopItems int
	// PlaybookCache is how many parsed playbooks the engine keeps, to
	// start an execution of a source it was given before (the same bytes
	// under the same file name) without parsing it again, and to rebuild
	// one from the log (Resume, Wait reading a finished execution back)
	// likewise: parsing is most of what starting a short execution
	// costs. Executions started from one source share its parsed
	// playbook, which nothing changes once it is parsed (as a NATS
	// worker's commands share the playbooks it fetched). Defaults to
	// DefaultPlaybookCache (256); a negative value keeps none. Whatever
	// the count, the sources kept come to at most 16 MiB: the least
	// recently started go first.
	PlaybookCache int
	// RenderLimits bound every template render of the executions this
	// engine drives and runs: output size, range length, time (see
	// dsl.Limits; zero fields take dsl's defaults: 16 MiB, 100,000 items,
	// 2 seconds).
	RenderLimits dsl.Limits
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
	// derive from the log itself. It must not block, and must not call
	// Close or Shutdown: they wait for the goroutine it runs on (an
	// observer that stops the engine on some event does it from another
	// goroutine: go e.Close()).
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
	// inProcess says whether this engine's own workers run its commands.
	inProcess bool
	orch      *orchestrator
	running   running
	worker    *Worker
	queue     *localQueue
	// stopOrch stops the orchestrator; stopWork cancels the commands the
	// in-process workers run.
	stopOrch, stopWork context.CancelFunc
	orchWG, workWG     sync.WaitGroup
	closed             bool
	mu                 sync.Mutex
	// playbooks holds parsed playbooks by file name and source
	// (Config.PlaybookCache); nil keeps none.
	playbooks *lru.Cache[string, *dsl.Playbook]
	// playbookBytes is the length of the playbooks' keys (their
	// sources), kept at most playbookMax (playbookCacheBytes).
	playbookBytes atomic.Int64
	playbookMax   int64
	// stopped is closed once the Close or Shutdown that closed the engine
	// has returned; cutShutdown ends a Shutdown's context early (a Close
	// while it runs).
	stopped     chan struct{}
	cutShutdown context.CancelFunc
	// busy counts the commands the in-process workers run; started is
	// when the engine started (both for Workers).
	busy    atomic.Int64
	started time.Time
}

// ErrConfig is wrapped by the error New (and NewProjection) returns for
// a configuration it refuses; the message names the field.
var ErrConfig = errors.New("engine: invalid configuration")

// New creates an engine and starts its orchestrator and workers. A
// Config without a Log, or with negative Workers, is refused with an
// error wrapping ErrConfig. Close
// stops them. The engine drives the executions it starts or resumes: the
// unfinished executions an earlier process left in Log wait for a Resume
// (list them with Log.Executions(ctx, eventlog.ExecutionsQuery{Unfinished:
// true})), or for engine/leader's Orchestrator, which resumes them all
// when it takes the lease.
func New(cfg Config) (*Engine, error) {
	if cfg.Log == nil {
		return nil, fmt.Errorf("%w: Config.Log is required", ErrConfig)
	}
	// Without a Dispatcher, commands go to a local queue that only the
	// in-process workers consume: with none, Wait would never return.
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("%w: Config.Workers is %d; want 0 (the default, %d, or none with a Dispatcher) or more", ErrConfig, cfg.Workers, DefaultWorkers)
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
	if cfg.MissedHeartbeats <= 0 {
		cfg.MissedHeartbeats = DefaultMissedHeartbeats
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System()
	}
	if cfg.MaxFinishedBytes <= 0 {
		cfg.MaxFinishedBytes = DefaultMaxFinishedBytes
	}
	if cfg.MaxFinished <= 0 {
		cfg.MaxFinished = DefaultMaxFinished
	}
	if cfg.FinishedTTL <= 0 {
		cfg.FinishedTTL = DefaultFinishedTTL
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.MaxLoopItems <= 0 {
		cfg.MaxLoopItems = DefaultMaxLoopItems
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = "w-" + uuid.NewString()[:8]
	}
	e := &Engine{cfg: cfg, started: cfg.Clock.Now(), stopped: make(chan struct{})}
	if cfg.PlaybookCache >= 0 {
		e.playbookMax = playbookCacheBytes
		// NewWithEvict fails only for a size below 1.
		e.playbooks, _ = lru.NewWithEvict(cmp.Or(cfg.PlaybookCache, DefaultPlaybookCache), func(key string, _ *dsl.Playbook) {
			e.playbookBytes.Add(-int64(len(key)))
		})
	}
	inProcess := cfg.Dispatcher == nil && cfg.Workers > 0
	e.checkTools, e.checkCursors, e.inProcess = hostTools || inProcess, hostCursors || inProcess, inProcess
	res := newResults(cfg.Results)
	e.worker = &Worker{ID: cfg.WorkerID, Tools: cfg.Tools, Cursors: cfg.Cursors, Keychain: cfg.Keychain, AllowCursorURL: cfg.AllowCursorURL, Logger: cfg.Logger,
		Clock: cfg.Clock, MaxResultBytes: cfg.MaxResultBytes, Partials: cfg.Partials, Results: cfg.Results, res: res,
		// Frames need not spread: in-process workers share one queue.
		MaxChain: -1}
	dispatch := cfg.Dispatcher
	if dispatch == nil {
		e.queue = newLocalQueue()
		e.queue.cancel = e.worker.Cancel
		dispatch = e.queue
	}
	e.orch = &orchestrator{
		log: cfg.Log, dispatch: dispatch, remoteWorkers: cfg.Dispatcher != nil, clock: cfg.Clock, logger: cfg.Logger,
		lease: cfg.CommandLease, missed: cfg.MissedHeartbeats, tick: cfg.Tick, maxBatch: cfg.MaxBatch, observer: cfg.Observer,
		maxResultBytes: cfg.MaxResultBytes, maxLoopItems: cfg.MaxLoopItems, renderLimits: cfg.RenderLimits,
		decide: (*State).decide, res: res, parse: e.parse,
		inbox: make(chan message, cfg.MaxBatch), ticker: cfg.Clock.NewTicker(cfg.Tick), done: make(chan struct{}),
		execs: map[string]*execution{}, reloading: map[string]*reload{}, children: map[string]map[string]struct{}{}, cancelling: map[string]struct{}{}, ended: map[string][]endedExecution{},
		driving: map[string]bool{}, finished: newSummaryCache(cfg.MaxFinished, cfg.MaxFinishedBytes, cfg.FinishedTTL), waiters: map[string]*waiter{},
		// An execution that ended failed or cancelled stops the commands
		// this process still runs for it.
		onFinish: e.running.cancelAll,
		// The drivers this engine's workers use clean up after the loop
		// runs that are over (cursor.Finisher).
		finisher: newFinisher(e.worker),
	}
	e.orch.closed, e.orch.markClosed = context.WithCancel(context.Background())
	octx, stopOrch := context.WithCancel(context.Background())
	wctx, stopWork := context.WithCancel(context.Background())
	e.stopOrch, e.stopWork = stopOrch, stopWork
	e.orchWG.Add(1)
	go func() { defer e.orchWG.Done(); e.orch.run(octx) }()
	if e.queue != nil {
		rep := &retryingReporter{rep: e.orch, clock: cfg.Clock, logger: cfg.Logger}
		for i := 0; i < cfg.Workers; i++ {
			e.workWG.Add(1)
			go func() { defer e.workWG.Done(); e.work(wctx, rep) }()
		}
	}
	return e, nil
}

// work is one in-process worker goroutine.
func (e *Engine) work(ctx context.Context, rep Reporter) {
	for {
		cmd, ok := e.queue.next(ctx)
		if !ok {
			return
		}
		e.execute(ctx, cmd, rep)
	}
}

func (e *Engine) execute(workCtx context.Context, cmd *Command, rep Reporter) {
	e.busy.Add(1)
	defer e.busy.Add(-1)
	ctx, cancel := context.WithCancel(workCtx)
	e.running.add(cmd.ExecutionID, cmd.ID, cancel)
	defer e.running.remove(cmd.ExecutionID, cmd.ID)
	returned := false
	defer func() {
		if r := recover(); r != nil {
			// A tool that panics must not take the engine down: the
			// command fails with the panic recorded.
			e.cfg.Logger.Error("command panicked", "command_id", cmd.ID, "panic", r, "stack", string(debug.Stack()))
			_ = e.worker.report(ctx, rep, cmd, eventlog.TypeCommandFailed, completedPayload{Error: fmt.Sprintf("panic: %v", r)})
			return
		}
		if !returned {
			// runtime.Goexit in a tool (t.FailNow in a test's tool, say)
			// ends this worker goroutine whatever is done here: another
			// takes its place, and the command, whose heartbeats stopped,
			// is re-issued when its lease runs out, within max_attempts.
			e.cfg.Logger.Error("a tool ended its worker goroutine (runtime.Goexit: t.FailNow in a tool?); another worker replaces it, and the command is re-issued when its lease runs out",
				"command_id", cmd.ID)
			e.workWG.Add(1)
			go func() { defer e.workWG.Done(); e.work(workCtx, rep) }()
		}
	}()
	err := e.worker.Execute(ctx, cmd, rep)
	returned = true
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, ErrClosed):
	case errors.Is(err, ErrStale), errors.Is(err, ErrUnknownExecution):
		// The command was re-issued or its execution ended: expected,
		// but an operator looking for a slow or stalled worker wants to
		// see that its work was not recorded.
		e.cfg.Logger.Info("report refused: the command was re-issued or its execution ended; this attempt's outcome is not recorded",
			"command_id", cmd.ID, "error", err)
	default:
		e.cfg.Logger.Warn("report refused", "command_id", cmd.ID, "error", err)
	}
}

// Reporter returns the reporter workers of this engine's orchestrator use;
// a transport that runs workers elsewhere delivers their reports to it.
func (e *Engine) Reporter() Reporter { return e.orch }

// Worker returns the engine's worker runtime, for transports that feed
// it commands from elsewhere.
func (e *Engine) Worker() *Worker { return e.worker }

// ErrInvalidExecutionID is wrapped by the error Start returns for a
// StartOptions.ExecutionID that cannot name an execution: longer than
// MaxExecutionIDLen bytes, not UTF-8, holding white space at its ends or a
// control character (a NUL, which no SQL log stores, a newline). Trying
// again cannot help.
var ErrInvalidExecutionID = errors.New("engine: invalid execution id")

// MaxExecutionIDLen bounds the length, in bytes, of an execution id a
// host chooses (StartOptions.ExecutionID).
const MaxExecutionIDLen = 200

// MaxStepNameLen bounds the length, in bytes, of a step's name in a
// playbook Start runs: every command id holds it, and the PostgreSQL log
// indexes command ids, whose btree rows hold at most 2704 bytes.
const MaxStepNameLen = 1024

// UnrecordableStepNames lists the steps of pb whose names the event log
// could not record: longer than MaxStepNameLen, or holding a NUL byte
// (eventlog.Validate). The log would refuse the step's first command, and
// with it the batch of every execution appended alongside, each time the
// engine tried again: Start refuses such a playbook (Resume does not, so
// an execution recorded before runs on as it began).
func UnrecordableStepNames(pb *dsl.Playbook) []dsl.Diagnostic {
	var out []dsl.Diagnostic
	for _, s := range pb.Workflow {
		switch {
		case len(s.Name) > MaxStepNameLen:
			out = append(out, dsl.Diagnostic{Pos: s.Pos, Warning: true,
				Message: fmt.Sprintf("step name is %d bytes, more than %d (engine.MaxStepNameLen: every command id holds it)", len(s.Name), MaxStepNameLen)})
		case strings.IndexByte(s.Name, 0) >= 0:
			out = append(out, dsl.Diagnostic{Pos: s.Pos, Warning: true,
				Message: fmt.Sprintf("step name %s holds a NUL byte, which no event log stores", strconv.Quote(s.Name))})
		}
	}
	return out
}

func validExecutionID(id string) error {
	switch {
	case len(id) > MaxExecutionIDLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidExecutionID, len(id), MaxExecutionIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: not UTF-8", ErrInvalidExecutionID)
	case strings.TrimSpace(id) != id:
		return fmt.Errorf("%w: %q has white space at its ends", ErrInvalidExecutionID, id)
	case strings.ContainsFunc(id, unicode.IsControl):
		return fmt.Errorf("%w: %q holds a control character", ErrInvalidExecutionID, id)
	}
	return nil
}

// ErrExecutionExists is wrapped by the error Start returns when the log
// already holds an execution under the id asked for (StartOptions.
// ExecutionID): a retry of a start that went through, say, or two
// processes starting one id at once. Nothing is recorded; Wait on the id
// follows the execution that holds it.
var ErrExecutionExists = errors.New("engine: execution already exists")

// StartOptions are the inputs of a new execution.
type StartOptions struct {
	// File names the playbook source in positions and events. It is
	// recorded as given: a host that takes it from a client bounds it
	// first (engine/api refuses one longer than api.MaxPlaybookFile or
	// holding control characters).
	File string
	// Workload overrides top-level workload keys.
	Workload map[string]any
	// ExecutionID fixes the new execution's id; defaults to a new UUIDv7.
	// Start refuses an id the log already holds (ErrExecutionExists) and
	// one that cannot name an execution (ErrInvalidExecutionID).
	ExecutionID string
	// Parent is the parent execution of a sub-playbook.
	Parent string
}

// Start parses the playbook source and starts an execution of it. The
// source is recorded in execution.started, so the log alone suffices to
// resume the execution anywhere.
//
// A source that does not parse is refused with the dsl.ErrorList
// dsl.Parse returns (reach it with errors.As), listing every problem.
//
// A playbook that uses a field this build does not honour (see
// dsl.Fields), or a tool or cursor kind the engine's registries do not
// hold, is refused before anything is recorded: the error is an
// *UnsupportedError (errors.Is(err, ErrUnsupported)) naming each problem's
// file:line:col. Kinds are checked when the engine runs workers itself or
// the host gave Config.Tools / Config.Cursors. So is a step whose name the
// event log could not record (longer than MaxStepNameLen bytes, or holding
// a NUL byte).
//
// An ExecutionID the log already holds events for is refused with an
// error wrapping ErrExecutionExists, and nothing is recorded. Of two
// processes starting one id at once, the log stores one start and the
// other Start gets ErrExecutionExists too.
//
// When ctx ends after the start reached the orchestrator but before it
// was recorded, the execution may still start and run: Start then returns
// its id with an error wrapping ctx's error (context.Canceled or
// context.DeadlineExceeded), so that the caller can Wait for it or Cancel
// it. So does a Start the engine's Close or Shutdown cut short after the
// orchestrator took the start (an error wrapping ErrClosed): the start may
// be on record, and a process that resumes the log runs it; and a Start
// whose append failed (ErrUnavailable): a failed append may have been
// stored all the same (a connection lost before the commit's reply), and
// then the execution runs. Look such an id up (Wait answers
// ErrUnknownExecution for one that is not on record) before starting the
// work again. On any other error the id is empty.
func (e *Engine) Start(ctx context.Context, src []byte, opts StartOptions) (string, error) {
	if e.isClosed() {
		return "", ErrClosed
	}
	pb, err := e.parse(opts.File, src)
	if err != nil {
		return "", err
	}
	if probs := e.Check(pb); len(probs) > 0 {
		return "", &UnsupportedError{Problems: probs}
	}
	if probs := UnrecordableStepNames(pb); len(probs) > 0 {
		// Checked at Start only: an execution recorded with such a name
		// resumes as it began.
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
	} else if err := validExecutionID(id); err != nil {
		return "", err
	} else if err := e.checkFresh(ctx, id); err != nil {
		return "", err
	}
	pb.SetLimits(e.cfg.RenderLimits)
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
	started, err := startedJSON(startedPayload{Playbook: string(src), File: opts.File, Workload: workload, Vars: vars, Parent: opts.Parent, Semantics: currentSemantics})
	if err != nil {
		return "", err
	}
	ev := eventlog.Event{ExecutionID: id, Type: eventlog.TypeExecutionStarted, Payload: started}
	st := NewState(id)
	st.Playbook = pb
	m := message{kind: msgStart, ev: ev, state: st}
	if opts.Parent != "" {
		// A child whose parent, driven here, ends before the child is
		// installed (its calling command ran on while a cancel or another
		// branch's failure ended the parent) has nobody to report to: it
		// is started cancelled (see orchestrator.parentGone).
		e.orch.mu.Lock()
		m.parentDriven = e.orch.driving[opts.Parent]
		e.orch.mu.Unlock()
	}
	queued, err := e.orch.sendQueued(ctx, m)
	if err != nil {
		switch {
		case !queued:
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			// The orchestrator has the start and may record it yet:
			// the caller needs the id to follow or cancel what runs.
			return id, fmt.Errorf("engine: start %s: %w before the start was acknowledged; the execution may run: Wait or Cancel it by this id", id, err)
		case errors.Is(err, ErrClosed), errors.Is(err, eventlog.ErrClosed):
			// The engine stopped with the start taken: it may be on
			// record, and whoever resumes the log runs it.
			return id, fmt.Errorf("engine: start %s: %w before the start was acknowledged; the execution may be on record, and run when the log is resumed: look it up by this id", id, err)
		case errors.Is(err, ErrUnavailable):
			// The append failed, but a failed append may have been
			// stored (a connection lost before the commit's reply): the
			// orchestrator loads the execution from the log again and
			// runs it if it is there. Starting again would run it twice.
			return id, fmt.Errorf("engine: start %s: %w; the start may be on record all the same, and then runs: look it up by this id (Wait) before starting again", id, err)
		}
		return "", err
	}
	return id, nil
}

// parse parses src, or returns what it parsed for the same file name and
// source before (Config.PlaybookCache). Only what parses is kept: a
// source with errors is parsed, and refused, every time.
func (e *Engine) parse(file string, src []byte) (*dsl.Playbook, error) {
	if e.playbooks == nil {
		return dsl.Parse(file, src)
	}
	key := cacheKey(file, src)
	if pb, ok := e.playbooks.Get(key); ok {
		return pb, nil
	}
	pb, err := dsl.Parse(file, src)
	if err != nil || int64(len(key)) > e.playbookMax {
		return pb, err
	}
	// Set before it is shared: Start sets the same limits again.
	pb.SetLimits(e.cfg.RenderLimits)
	if prev, found, _ := e.playbooks.PeekOrAdd(key, pb); found {
		return prev, nil // parsed meanwhile by another Start
	}
	e.playbookBytes.Add(int64(len(key)))
	for e.playbookBytes.Load() > e.playbookMax {
		// The eviction callback takes the oldest's bytes off.
		if _, _, ok := e.playbooks.RemoveOldest(); !ok {
			break
		}
	}
	return pb, nil
}

// cacheKey is the key of src under the file name file in the cache of
// parsed playbooks: the name's length first, so that no name and source
// run together into another pair's.
func cacheKey(file string, src []byte) string {
	return strconv.Itoa(len(file)) + ":" + file + string(src)
}

// checkFresh refuses an id the log holds events for: starting it would
// run the playbook a second time in the same history. This read refuses
// a repeated Start before anything is decided; two starts racing past it
// are settled where the events are written, since the log refuses a
// second execution.started (eventlog.ErrAlreadyStarted, mapped to
// ErrExecutionExists by the orchestrator). A generated UUIDv7 needs
// neither read nor check, only the log's.
func (e *Engine) checkFresh(ctx context.Context, id string) error {
	events, err := e.cfg.Log.Read(ctx, id, 0, 1)
	if err != nil {
		return fmt.Errorf("engine: start %s: %w", id, err)
	}
	if len(events) > 0 {
		return fmt.Errorf("%w: %s", ErrExecutionExists, id)
	}
	return nil
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
	// A tool turned off here is refused only when this engine's workers
	// run the playbook; remote workers have tools of their own.
	probs := check(pb, treg, creg, e.inProcess)
	if e.cfg.Results == nil && pb != nil {
		probs = append(probs, needsStore(pb)...)
	}
	return probs
}

// Resume continues an execution that an earlier process left unfinished:
// it folds the execution's events and decides what is left. Commands that
// were in flight are re-issued (at once with the in-process transport,
// after their lease with a durable one).
//
// A sub-playbook execution whose awaiting execution has ended is
// cancelled once loaded (with reason "the execution awaiting it ended"),
// as it would have been had the process that drove both lived on.
//
// An execution recorded under newer semantics than this build's (started
// by a newer release) is refused with an error wrapping
// ErrNewerSemantics, recording nothing.
//
// Like Start, Resume refuses a playbook this engine would not run (a tool
// or cursor kind its registries lack, a refused field) with an
// *UnsupportedError, recording nothing: the execution stays resumable on
// an engine that runs it.
func (e *Engine) Resume(ctx context.Context, executionID string) error {
	if e.isClosed() {
		return ErrClosed
	}
	events, err := e.cfg.Log.Read(ctx, executionID, 0, 0)
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return fmt.Errorf("%w: %s has no events", ErrUnknownExecution, executionID)
	}
	st, err := foldParsing(executionID, events, e.parse)
	if err != nil {
		return err
	}
	if st.Status != StatusRunning {
		e.orch.mu.Lock()
		e.orch.finished.put(executionID, summarize(st), e.cfg.Clock.Now())
		e.orch.mu.Unlock()
		return nil
	}
	if st.semantics > currentSemantics {
		// Started by a newer build (an operator rolled back): driven
		// here it would run under rules older than those it was
		// recorded with, and decide differently than it began. Refused,
		// it waits, unchanged, for a build that knows its level.
		return fmt.Errorf("%w: %s runs under semantics %d, this build knows up to %d; resume it with the release that started it or a newer one",
			ErrNewerSemantics, executionID, st.semantics, currentSemantics)
	}
	// Driven on, a step of a kind this engine lacks would fail and end
	// the execution failed for good; refused here, it waits for an engine
	// that has the kind.
	if st.Playbook != nil {
		if probs := e.Check(st.Playbook); len(probs) > 0 {
			return &UnsupportedError{Problems: probs}
		}
	}
	orphan, err := e.awaiterEnded(ctx, st)
	if err != nil {
		return err
	}
	m := message{kind: msgLoad, state: st}
	if orphan {
		// A sub-playbook execution whose awaiter ended (the process
		// driving both died before it recorded the child's cancel) has
		// nobody to report to: it is cancelled, not run on. The cancel
		// goes with the load, so that it is applied before anything is
		// decided for the execution: sent after it, the re-issued work
		// could run, and end the execution, first.
		m.ev = eventlog.Event{ExecutionID: executionID, Type: eventlog.TypeCancelRequested,
			Payload: mustJSON(map[string]string{"reason": "the execution awaiting it ended"})}
	}
	return e.orch.send(ctx, m)
}

// awaiterEnded reports whether st is a sub-playbook execution whose
// awaiting execution has ended in the log.
func (e *Engine) awaiterEnded(ctx context.Context, st *State) (bool, error) {
	if st.parent == "" {
		return false, nil
	}
	e.orch.mu.Lock()
	driven := e.orch.driving[st.parent]
	e.orch.mu.Unlock()
	if driven {
		// Running here (a sub-playbook call attaching to its child): no
		// need to read and fold the parent's whole history.
		return false, nil
	}
	events, err := e.cfg.Log.Read(ctx, st.parent, 0, 0)
	if err != nil || len(events) == 0 {
		return false, err
	}
	parent, err := foldParsing(st.parent, events, e.parse)
	if err != nil {
		return false, err
	}
	return parent.Status != StatusRunning, nil
}

// Cancel asks a running execution to stop. No new work is issued; every
// worker running its commands is told (Dispatcher.Cancel): frames stop
// between rows and hand the rows they have not started back to the source
// (or run them where the source cannot take them back); rows still
// running one lease (lease_seconds) after the cancel are interrupted and
// handed back, or reported abandoned where the source cannot take them;
// step and item commands are interrupted at once. The execution ends
// cancelled once its
// commands in flight have reported or their leases ran out; a frame whose
// worker vanished meanwhile gets one more attempt that only releases its
// recorded rows. Cancel returns once the request is recorded; Wait
// returns when the execution has ended. An execution this engine does not
// drive (it has ended, or another process drives it) gets an error
// wrapping ErrUnknownExecution.
func (e *Engine) Cancel(ctx context.Context, executionID string) error {
	if e.isClosed() {
		return ErrClosed
	}
	return e.orch.send(ctx, message{kind: msgCancel, ev: eventlog.Event{ExecutionID: executionID, Type: eventlog.TypeCancelRequested}})
}

// Wait blocks until the execution ends (or ctx is done) and returns its
// summary. An execution this engine does not drive (another process
// drives it, or it ended long ago) is followed in the log. Wait returns
// ErrClosed if the engine closes first, and ErrUnknownExecution for an
// execution the log does not hold. For an execution this engine drives,
// Wait returns once its worker has also settled the cursor claims whose
// record ended a loop (a drained claim's dead rows reach the source's
// dead letter on its commit, after the record), so the source shows what
// the summary reports.
func (e *Engine) Wait(ctx context.Context, executionID string) (*Summary, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	o := e.orch
	o.mu.Lock()
	if s := o.finished.get(executionID, e.cfg.Clock.Now()); s != nil {
		o.mu.Unlock()
		e.settled(ctx, executionID)
		return s, nil
	}
	if !o.driving[executionID] {
		o.mu.Unlock()
		return e.waitLog(ctx, executionID)
	}
	w := o.waiters[executionID]
	if w == nil {
		w = &waiter{ch: make(chan struct{})}
		o.waiters[executionID] = w
	}
	w.n++
	o.mu.Unlock()
	select {
	case <-w.ch:
		if w.sum == nil {
			return nil, fmt.Errorf("%w: %s did not start", ErrUnknownExecution, executionID)
		}
		e.settled(ctx, executionID)
		return w.sum, nil
	case <-ctx.Done():
		o.leave(executionID, w)
		return nil, ctx.Err()
	case <-o.done:
		o.leave(executionID, w)
		return nil, ErrClosed
	}
}

// settled waits until this engine's worker has settled every drained
// claim of the execution with its source, or ctx ends. Such a claim's
// frame.done can end the loop, and so the execution, before its commit
// moves its dead rows to the source's dead letter: Wait returns once the
// source shows the outcome the summary reports.
func (e *Engine) settled(ctx context.Context, executionID string) {
	if e.worker != nil {
		e.worker.settling.waitExecution(ctx, executionID)
	}
}

// leave drops one Wait from w, and w once nobody waits on it.
func (o *orchestrator) leave(id string, w *waiter) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w.n--
	if w.n == 0 && o.waiters[id] == w {
		delete(o.waiters, id)
	}
}

// waitLog follows an execution in the log until its terminal event.
func (e *Engine) waitLog(ctx context.Context, executionID string) (*Summary, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.orch.closed, cancel)
	defer stop()
	st := NewState(executionID)
	st.parse = e.parse
	for {
		events, err := e.cfg.Log.Read(ctx, executionID, st.LastSeq, 0)
		if err != nil {
			return nil, e.waitErr(ctx, err)
		}
		if st.LastSeq == 0 && len(events) == 0 {
			return nil, fmt.Errorf("%w: %s", ErrUnknownExecution, executionID)
		}
		for _, ev := range events {
			if err := st.Apply(ev); err != nil {
				return nil, err
			}
		}
		if st.Status != StatusRunning {
			sum := summarize(st)
			e.orch.mu.Lock()
			e.orch.finished.put(executionID, sum, e.cfg.Clock.Now())
			e.orch.mu.Unlock()
			return sum, nil
		}
		if err := e.cfg.Log.Wait(ctx, executionID, st.LastSeq); err != nil {
			return nil, e.waitErr(ctx, err)
		}
	}
}

// waitErr reports ErrClosed for a wait the engine's close ended.
func (e *Engine) waitErr(ctx context.Context, err error) error {
	select {
	case <-e.orch.done:
		return ErrClosed
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Driving lists the executions this engine's orchestrator drives now.
func (e *Engine) Driving(ctx context.Context) ([]string, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	var ids []string
	err := e.orch.send(ctx, message{kind: msgList, list: &ids})
	return ids, err
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// markClosing makes every later call fail with ErrClosed; it reports
// whether this call did it, and then keeps cut (a Shutdown's) for a Close
// to end that Shutdown's wait.
func (e *Engine) markClosing(cut context.CancelFunc) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.closed, e.cutShutdown = true, cut
	return true
}

// Shutdown stops the engine gracefully: it takes no new calls (they fail
// with ErrClosed), dispatches nothing new and lets the commands its
// workers run finish, recording their reports, until ctx ends; then it
// cancels what still runs. Whatever is left — commands issued and not
// run, successors not yet decided — stays in the log for Resume (here or
// in another process) to take up. It returns ctx's error if it had to
// cancel running commands; it waits at most two seconds past ctx for
// them to return, and abandons a tool that ignores its context (see
// Close). Either way the workers' last reports (a cursor
// frame cut short says which rows it handed back) are recorded before it
// returns, waiting up to 5s more for the log. Last, it waits, until ctx
// ends, for the clean-ups of cursor loop runs that ended
// (cursor.Finisher).
//
// A Close while Shutdown runs cuts it short, as if ctx had ended (it then
// returns context.Canceled if it cut commands short). A Shutdown after
// Close or another Shutdown began waits until the engine has stopped, or
// ctx ends.
func (e *Engine) Shutdown(ctx context.Context) error {
	// The frames running claim no rows ahead (from before calls fail, so
	// that a caller who sees ErrClosed knows it).
	e.worker.Drain()
	ctx, cut := context.WithCancel(ctx)
	defer cut()
	if !e.markClosing(cut) {
		// Closed, or closing: wait for that to end, as long as ctx lets.
		select {
		case <-e.stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer close(e.stopped)
	// Record what the workers report, decide nothing more.
	_ = e.orch.send(context.Background(), message{kind: msgDrain})
	if e.queue != nil {
		e.queue.close()
	}
	finished := e.workersDone()
	var err error
	select {
	case <-finished:
	case <-ctx.Done():
		select {
		case <-finished: // ctx ended as the workers did: nothing to cancel
		default:
			// Idle workers are only leaving the closed queue: ctx's end
			// is an error only if it cuts commands short.
			if e.busy.Load() > 0 {
				err = ctx.Err()
			}
			e.stopWork()
			e.awaitWorkers(finished)
		}
	}
	e.stopWork()
	// The workers' last reports (frames cut short hand their rows back and
	// say so) are recorded before the orchestrator stops.
	fctx, cancel := context.WithTimeout(context.Background(), shutdownFlush)
	_ = e.orch.send(fctx, message{kind: msgFlush})
	cancel()
	e.stopOrch()
	e.orchWG.Wait()
	// Clean-ups of loop runs that ended are let finish, as long as ctx
	// lasts.
	e.orch.finisher.wait(ctx)
	return err
}

// shutdownFlush bounds how long Shutdown waits, once the workers
// stopped, for the log to record their last reports.
const shutdownFlush = 5 * time.Second

// abandonAfter bounds how long Close, and Shutdown past its context, wait
// for the commands they cancelled to return. A tool that ignores its
// context is abandoned then: its goroutine runs on until the tool
// returns, nothing it reports is recorded, and its command stays in
// flight in the log for whoever resumes the execution.
const abandonAfter = 2 * time.Second

// workersDone returns a channel closed once every worker goroutine has
// returned.
func (e *Engine) workersDone() <-chan struct{} {
	finished := make(chan struct{})
	go func() { e.workWG.Wait(); close(finished) }()
	return finished
}

// awaitWorkers waits for finished (closed once every worker returned), at
// most abandonAfter, and says loudly what it abandons.
func (e *Engine) awaitWorkers(finished <-chan struct{}) {
	t := time.NewTimer(abandonAfter)
	defer t.Stop()
	select {
	case <-finished:
	case <-t.C:
		e.cfg.Logger.Error("commands still running after their cancellation are abandoned: their tools ignore their context; what the log holds of them is settled by a resume (or their lease)",
			"commands", e.busy.Load(), "waited", abandonAfter)
	}
}

// Close stops the orchestrator and the workers at once. Running commands
// are cancelled; their executions can be resumed from the log. Close
// waits for the cancelled tools to return, at most two seconds: a tool
// that ignores its context is abandoned (its goroutine runs on, its
// outcome is not recorded). It gives the clean-ups of cursor loop runs
// that ended (cursor.Finisher) two seconds more, then cuts them short.
// Calls made after Close fail with ErrClosed.
//
// Close returns once the engine has stopped, however it is called: a
// Close while a Shutdown runs cuts the Shutdown short (its running
// commands are cancelled; the Shutdown returns the context's error) and
// returns once the engine has stopped, and a Close while another runs
// waits for it. A later Close returns nil at once.
func (e *Engine) Close() error {
	if !e.markClosing(nil) {
		// A Shutdown under way is cut short, as if its context ended;
		// a Close under way is waited for. Either way the engine has
		// stopped when Close returns.
		e.mu.Lock()
		cut := e.cutShutdown
		e.mu.Unlock()
		if cut != nil {
			cut()
		}
		<-e.stopped
		return nil
	}
	defer close(e.stopped)
	e.stopWork()
	e.stopOrch()
	e.awaitWorkers(e.workersDone())
	e.orchWG.Wait()
	// Clean-ups of loop runs that ended get a moment: a program that
	// closes the engine right after Wait would otherwise leave every
	// run's consumer group behind.
	fctx, cancel := context.WithTimeout(context.Background(), abandonAfter)
	e.orch.finisher.wait(fctx)
	cancel()
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
	// Results holds each step's result: the envelope {status, data,
	// error} (an http step's also http). A pipeline step's also names the
	// task its data came from (task) and holds its named earlier tasks'
	// data by name (tasks), which templates read as STEP.results.TASK.
	Results map[string]any `json:"-"`
}

func summarize(s *State) *Summary {
	sum := &Summary{ExecutionID: s.ExecutionID, Status: s.Status, Steps: map[string]string{}, Events: s.Events, Results: s.Results}
	best := map[string]int{}
	for step, r := range s.steps {
		best[step] = r.N
		sum.Steps[step] = r.Status
	}
	for _, r := range s.Runs {
		n := runNumber(r.ID)
		if n >= best[r.Step] {
			best[r.Step] = n
			sum.Steps[r.Step] = r.Status
		}
	}
	if s.Status == StatusCancelled {
		// What ran when the execution was cancelled stopped with it.
		for step, st := range sum.Steps {
			if st == runRunning {
				sum.Steps[step] = StatusCancelled
			}
		}
	}
	if s.Status == StatusFailed {
		sum.Step, sum.Field, sum.Error = s.Failure.Step, s.Failure.Field, s.Failure.Message
		// A step whose routing failed (a next template, on_no_match:
		// error) ran, but never ended: it is where the execution failed.
		if sum.Steps[sum.Step] == runRunning {
			sum.Steps[sum.Step] = runFailed
		}
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
