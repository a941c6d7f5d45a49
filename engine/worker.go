package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/jsonnum"
	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/tools"
)

// Worker executes commands: it renders a step's tool configuration, runs
// its tools under their policies, claims cursor frames and reports the
// outcome. A Worker holds no execution state between commands.
type Worker struct {
	// ID names the worker in events (worker_id).
	ID       string
	Tools    *tools.Registry
	Cursors  *cursor.Registry
	Keychain tools.Keychain
	Logger   *slog.Logger
	// Clock runs heartbeats and row backoffs. Defaults to clock.System().
	Clock clock.Clock
	// MaxResultBytes bounds the result a command reports; a larger one is
	// reported as the command's failure. Defaults to DefaultMaxResultBytes.
	MaxResultBytes int

	// Partials bounds the partial results (call.partial events) the
	// tools of one command hand on while they run.
	Partials PartialLimits
	// Results, when set, is where a command's result goes when it is
	// larger than the store's threshold: the report carries a reference.
	// It also reads the stored results a command's templates use. It
	// must be the store the orchestrator uses (engine.Config.Results).
	Results *resultstore.Store
	// MaxChain bounds how many frames in a row a cursor slot runs here by
	// chaining (see ChainReporter) before it reports a frame alone, so its
	// next frame goes through the dispatcher and frames spread over
	// workers that joined since. Zero means DefaultMaxChain; a negative
	// value, no bound (the engine's own in-process workers, which share
	// one queue).
	MaxChain int
	// AllowCursorURL lets a cursor block name its source with a url
	// option (a sqlite path, postgres://..., s3://...) instead of a
	// keychain alias (auth:). Off by default: such a url is reached with
	// this process's own rights, files and environment credentials
	// (PGPASSWORD, ~/.pgpass, AWS_*) included, so it is for workers that
	// run only their operator's playbooks. See Config.AllowCursorURL.
	AllowCursorURL bool

	cancels cancels
	// settling counts the drained claims whose frame.done is being
	// recorded and committed, per loop run: the loop's Finish waits for
	// them (settleDrained).
	settling settlingRuns
	resOnce  sync.Once
	// draining is set by Drain.
	draining atomic.Bool
	res      *results
}

// results returns the worker's stored results (reads are cached).
func (w *Worker) results() *results {
	w.resOnce.Do(func() {
		if w.res == nil {
			w.res = newResults(w.Results)
		}
	})
	return w.res
}

func (w *Worker) clock() clock.Clock {
	if w.Clock != nil {
		return w.Clock
	}
	return clock.System()
}

// Drain tells the worker that it is stopping: the cursor frames it runs
// finish their rows and report without claiming their slot's next rows
// ahead (chaining), so that a stopping worker takes no new rows. Commands
// it is given still run. A drained worker stays drained.
func (w *Worker) Drain() { w.draining.Store(true) }

// Cancel tells the worker that an execution is being cancelled. A claim
// its frames are making is cut short (one blocked on a lock or on a
// connection gone silent included), and the frame reports the cancel,
// having claimed nothing. Its frames running now stop between rows: rows not started are handed back
// to the source (or, where the source cannot take them back, run to the
// end), rows still running one lease later are interrupted, and the frame
// reports what it did (rows it could neither finish nor hand back are
// listed as abandoned). Its step and item commands
// running now are interrupted and report failure. Commands of the
// execution that reach the worker later stop at once. The in-process
// engine calls Cancel itself; a transport calls it when the orchestrator
// announces a cancel (engine/natsjs does). Calling it again, or for an
// execution the worker never saw, is harmless.
func (w *Worker) Cancel(executionID string) { w.cancels.cancel(executionID) }

// Execute runs cmd and reports its outcome through rep. Errors are
// reported, not returned: the return value only says whether the report
// itself got through.
func (w *Worker) Execute(ctx context.Context, cmd *Command, rep Reporter) error {
	start := time.Now()
	ctx = withSecrets(ctx)
	step := cmd.Playbook.Step(cmd.Step)
	if step == nil {
		return w.report(ctx, rep, cmd, eventlog.TypeCommandFailed, completedPayload{Error: fmt.Sprintf("no step named %q", cmd.Step)})
	}
	cancelled, release := w.cancels.watch(cmd.ExecutionID)
	defer release()
	if cmd.Kind == KindFrame {
		return w.runFrame(ctx, cmd, step, rep, cancelled)
	}
	stop := w.heartbeat(ctx, cmd, rep, true)
	defer stop()
	// A cancel interrupts the tools; the report still goes out on ctx.
	runCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	go func() {
		select {
		case <-cancelled:
			interrupt()
		case <-runCtx.Done():
		}
	}()
	scope := cmd.commandScope()
	localRefs(ctx, scope, w.results())
	addArgs(scope, cmd.Args)
	part := w.startPartials(ctx, cmd, rep)
	defer part.close()
	var res chainResult
	var p completedPayload
	if cmd.Kind == KindItem && cmd.Count > 0 {
		if cmd.ItemsRef != nil {
			items, err := w.storedItems(ctx, cmd, cmd.Index, cmd.Index+cmd.Count)
			if err != nil {
				return w.report(ctx, rep, cmd, eventlog.TypeCommandFailed, completedPayload{Error: err.Error(), Field: "loop.in"})
			}
			c := *cmd
			c.Items = items
			cmd = &c
		}
		res, p = w.runChunk(withPartials(runCtx, part, ""), cmd, step, scope)
	} else {
		switch cmd.Kind {
		case KindItem:
			item := cmd.Item
			if cmd.ItemsRef != nil {
				items, err := w.storedItems(ctx, cmd, cmd.Index, cmd.Index+1)
				if err != nil {
					return w.report(ctx, rep, cmd, eventlog.TypeCommandFailed, completedPayload{Error: err.Error(), Field: "loop.in"})
				}
				item = items[0]
			}
			setIter(scope, step.Loop.Iterator, item, cmd.Index, cmd.Length, cmd.LoopVars)
		case KindShard:
			items, _ := cmd.Item.([]any)
			if cmd.ItemsRef != nil {
				var err error
				if items, err = w.storedItems(ctx, cmd, cmd.From, cmd.To); err != nil {
					return w.report(ctx, rep, cmd, eventlog.TypeCommandFailed, completedPayload{Error: err.Error(), Field: "loop.in"})
				}
			}
			setIter(scope, step.Loop.Iterator, items, cmd.Index, cmd.Shards, cmd.LoopVars)
			scope["shard"] = map[string]any{"index": cmd.Index, "count": cmd.Shards, "from": cmd.From, "to": cmd.To, "size": len(items)}
		}
		res = w.runChain(withPartials(runCtx, part, ""), cmd, step, scope, cmd.StartTask, cmd.TaskAttempt, cmd.Carry, true)
		if res.abandoned {
			// The engine the task needed is shutting down: the command
			// stays in flight in the log, for whoever resumes the execution.
			return ErrClosed
		}
		if res.await != nil {
			// The worker is free again; the command waits, in the log, for
			// the execution its task started.
			part.close()
			res.await.Ms = time.Since(start).Milliseconds()
			return w.report(ctx, rep, cmd, eventlog.TypeCommandAwaiting, res.await)
		}
		res.output = selectOutput(step, res.output)
		p = completedPayload{Output: res.output, Ctx: res.ctx, Vars: res.vars, Jump: res.jump}
	}
	if (res.failed || (res.retry != nil && !res.retry.Paging)) && ctx.Err() != nil && !closed(cancelled) {
		// The worker is stopping (an engine shutdown, a second interrupt)
		// and cut the command short: that is not its outcome. It stays in
		// flight in the log, as a killed worker leaves it, for whoever
		// resumes the execution (or the lease's expiry) to run again,
		// rather than fail the execution for good.
		return ErrClosed
	}
	// The partials are recorded before the command's outcome.
	part.close()
	p.Ms = time.Since(start).Milliseconds()
	// Large parts go to the result store first: the report that carries
	// their references is what the result size bound then measures.
	if err := w.storeLarge(ctx, cmd, step, &p); err != nil {
		return w.report(ctx, rep, cmd, eventlog.TypeCommandFailed, completedPayload{
			Error: fmt.Sprintf("the result could not be stored: %v", err), Field: "result", Ms: p.Ms})
	}
	if res.retry != nil && res.retry.Paging {
		// A page succeeded and the next one is wanted: recorded as done
		// (under a cancel too: the page's work is done; nothing follows it).
		p.Retry, p.Task = res.retry, res.task
		return w.report(ctx, rep, cmd, eventlog.TypeCommandCompleted, p)
	}
	if closed(cancelled) && (res.failed || res.retry != nil) {
		p.Error, p.Task, p.Field = cancelledError, res.task, res.field
		return w.report(ctx, rep, cmd, eventlog.TypeCommandFailed, p)
	}
	if res.failed || res.retry != nil {
		p.Error, p.Task, p.Field, p.Retry = res.err, res.task, res.field, res.retry
		return w.report(ctx, rep, cmd, eventlog.TypeCommandFailed, p)
	}
	return w.report(ctx, rep, cmd, eventlog.TypeCommandCompleted, p)
}

// storedItems returns items [from, to) of the stored collection the
// command refers to.
func (w *Worker) storedItems(ctx context.Context, cmd *Command, from, to int) ([]any, error) {
	v, err := w.results().resolve(ctx, cmd.ItemsRef)
	if err != nil {
		return nil, fmt.Errorf("read the stored collection: %w", err)
	}
	items, ok := v.([]any)
	if !ok || from < 0 || from > to || to > len(items) {
		return nil, fmt.Errorf("the stored collection has no items %d..%d", from, to)
	}
	return items[from:to:to], nil
}

// storeLarge replaces the parts of a command's report that are larger
// than the result store's threshold (its output's data, a chunk's outputs'
// data, each ctx and vars assignment) with references, writing them
// first. The step's output block (NoETL's output.store.kind,
// inline_max_bytes) decides for its result.
func (w *Worker) storeLarge(ctx context.Context, cmd *Command, step *dsl.Step, p *completedPayload) error {
	r := w.results()
	policy := outputPolicyOf(cmd.Playbook, step)
	if r.store == nil {
		if policy.always() && p.Output != nil {
			return fmt.Errorf("output.store.kind %s asks for a result store, and this worker has none (Worker.Results, --result-store)", policy.kind)
		}
		return nil
	}
	name := cmd.ExecutionID + "/" + cmd.ID
	storeData := func(out map[string]any) (map[string]any, error) {
		if out == nil || policy.inline() {
			return out, nil
		}
		threshold := policy.threshold(r.store.Threshold())
		c := copyMap(out)
		var err error
		if data, ok := out["data"]; ok {
			if c["data"], err = r.offload(ctx, name, data, threshold); err != nil {
				return nil, err
			}
		}
		// A pipeline's earlier tasks' results, each on its own.
		if tr, ok := out["tasks"].(map[string]any); ok && len(tr) > 0 {
			stored := make(map[string]any, len(tr))
			for k, v := range tr {
				if stored[k], err = r.offload(ctx, name, v, threshold); err != nil {
					return nil, err
				}
			}
			c["tasks"] = stored
		}
		return c, nil
	}
	var err error
	if p.Output, err = storeData(p.Output); err != nil {
		return err
	}
	for i := range p.Outputs {
		if p.Outputs[i], err = storeData(p.Outputs[i]); err != nil {
			return err
		}
	}
	for _, m := range []map[string]any{p.Ctx, p.Vars} {
		for k, v := range m {
			x, err := r.offload(ctx, name, v, -1)
			if err != nil {
				return err
			}
			m[k] = x
		}
	}
	return nil
}

// runChunk runs a chunked loop's items one after another in this command
// (retries inside it wait in place, as a frame's rows do) and returns
// their outputs in order. The first item that fails fails the chunk: its
// result is returned, with the payload's error naming the item.
func (w *Worker) runChunk(ctx context.Context, cmd *Command, step *dsl.Step, scope map[string]any) (chainResult, completedPayload) {
	p := completedPayload{Outputs: make([]map[string]any, 0, len(cmd.Items))}
	for k, item := range cmd.Items {
		sc := copyMap(scope)
		setIter(sc, step.Loop.Iterator, item, cmd.Index+k, cmd.Length, cmd.LoopVars)
		res := w.runChain(ctx, cmd, step, sc, 0, 1, nil, false)
		res.output = selectOutput(step, res.output)
		p.Output = res.output
		if res.failed {
			res.err = fmt.Sprintf("item %d: %s", cmd.Index+k, res.err)
			return res, p
		}
		p.Outputs = append(p.Outputs, res.output)
		if len(res.ctx) > 0 {
			if p.Ctx == nil {
				p.Ctx = map[string]any{}
			}
			merge(p.Ctx, res.ctx)
		}
	}
	return chainResult{}, p
}

func (w *Worker) report(ctx context.Context, rep Reporter, cmd *Command, typ string, payload any) error {
	return rep.Report(ctx, w.event(ctx, cmd, typ, payload))
}

// event is the report of cmd of type typ with payload, as it is sent.
func (w *Worker) event(ctx context.Context, cmd *Command, typ string, payload any) eventlog.Event {
	b, err := encodeReport(ctx, payload)
	if err != nil {
		typ, payload = unrecordable(typ, payload, err)
		b = reportJSON(ctx, payload)
	}
	return w.eventOf(ctx, cmd, typ, payload, b)
}

// eventOf is the report of cmd of type typ with payload, encoded as b.
func (w *Worker) eventOf(ctx context.Context, cmd *Command, typ string, payload any, b json.RawMessage) eventlog.Event {
	ev := eventlog.Event{
		ExecutionID: cmd.ExecutionID, Type: typ, Step: cmd.Step, CommandID: cmd.ID,
		Attempt: cmd.Attempt, WorkerID: w.ID, Payload: b,
	}
	if cmd.Kind != KindStep {
		ev.LoopID = cmd.Run
	}
	if cmd.Kind == KindFrame {
		ev.Frame = cmd.Frame
	}
	limit := w.MaxResultBytes
	if limit <= 0 {
		limit = DefaultMaxResultBytes
	}
	if len(b) > limit {
		ev.Payload = w.withoutTaskResults(ctx, cmd, payload, b, limit)
	}
	return limitResult(ev, limit)
}

// withoutTaskResults returns the encoded report b of a pipeline step
// without its earlier tasks' results when only they make it larger than
// limit: a step that ran fine keeps its own result, and STEP.results.TASK
// reads nothing (the warning says to give the engine a result store,
// which would have kept them). Any other report is returned as it is.
func (w *Worker) withoutTaskResults(ctx context.Context, cmd *Command, payload any, b []byte, limit int) []byte {
	p, ok := payload.(completedPayload)
	if !ok || p.Output["tasks"] == nil {
		return b
	}
	p.Output = copyMap(p.Output)
	delete(p.Output, "tasks")
	smaller, err := encodeReport(ctx, p)
	if err != nil || len(smaller) > limit {
		return b
	}
	w.logger().Warn("a pipeline step's earlier task results do not fit in its event and are left out: STEP.results.TASK reads nothing for it; a result store (Config.Results) would keep them",
		"execution_id", cmd.ExecutionID, "step", cmd.Step, "bytes", len(b), "max", limit)
	return smaller
}

// heartbeat extends cmd's lease until the returned stop is called. With
// first it beats at once too: that beat tells the orchestrator a worker
// took the attempt, which then counts toward max_attempts when its lease
// runs out (an attempt nobody took does not), so a command that kills
// its worker as it starts still reaches its limit.
func (w *Worker) heartbeat(ctx context.Context, cmd *Command, rep Reporter, first bool) (stop func()) {
	every := cmd.Heartbeat
	if every <= 0 {
		every = cmd.Lease / dsl.HeartbeatsPerLease
	}
	if every <= 0 {
		return func() {}
	}
	if first {
		// Sent before the work starts, not from the goroutine: a command
		// that ends its worker at once must not outrun it.
		_ = rep.Heartbeat(ctx, cmd.ExecutionID, cmd.ID)
	}
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := w.clock().NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C():
				_ = rep.Heartbeat(hctx, cmd.ExecutionID, cmd.ID)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// iterKeys is how many keys setIter adds to a scope.
const iterKeys = 4

// setIter gives an item's scope NoETL's loop variables (commands.py,
// _create_command_for_step): the item under the iterator's name and
// iter.<iterator>; its 0-based position as loop_index, iter._index and
// loop.index; and, when the loop's length n is known (n > 0; a cursor's
// rows have none), iter._first, iter._last, loop.first and loop.length.
// loop.done is false while items run, as NoETL's is. Without loopVars (a
// history recorded before semanticsCallDone) there is no loop variable: a
// workload key, ctx key or step result named loop keeps that name.
func setIter(scope map[string]any, iterator string, item any, index, n int, loopVars bool) {
	idx := any(index) // boxed once for all places
	iter := map[string]any{"_index": idx}
	if n > 0 {
		iter["_first"], iter["_last"] = index == 0, index >= n-1
	}
	if iterator != "" {
		iter[iterator] = item
		scope[iterator] = item
	}
	scope["iter"] = iter
	scope["loop_index"] = idx
	if loopVars {
		loop := map[string]any{"index": idx, "done": false}
		if n > 0 {
			loop["first"], loop["length"] = index == 0, n
		}
		scope["loop"] = loop
	}
}

// chainResult is the outcome of running a step's tool chain once.
type chainResult struct {
	output map[string]any
	ctx    map[string]any
	vars   map[string]any
	jump   string
	failed bool
	err    string
	task   string
	field  string
	retry  *retryRequest
	// await parks the command until another execution ends.
	await *awaitingPayload
	// abandoned: a task found the engine closed (a sub-playbook during
	// Shutdown); nothing is reported.
	abandoned bool
	// explicit marks a failure a policy chose (do: fail) or a configuration
	// error: it stops a whole cursor loop, while a row whose tool failed
	// with no rule deciding is recorded as that row's error and the loop
	// goes on.
	explicit bool
}

// chainState is what a pipeline accumulates as it runs, carried across a
// durable retry.
type chainState struct {
	Iter   map[string]any `json:"iter,omitempty"`
	Locals map[string]any `json:"locals,omitempty"`
	Ctx    map[string]any `json:"ctx,omitempty"`
	Vars   map[string]any `json:"vars,omitempty"`
	// tasks is the pipeline's task list (nil for a single tool), whose
	// named tasks' results make up results.
	tasks []*dsl.Task
	// prev is NoETL's _prev, the last task's result data, when hasPrev.
	// It is a local like any other, kept out of Locals so that a single
	// tool's chain (every row of a frame) makes no map for it; a carry
	// holds it under locals as before (see carry, chainFromCarry), and
	// a set: that writes _prev moves it back into Locals first
	// (takePrev), so exactly one of the two holds it.
	prev    any
	hasPrev bool
}

// setPrev records a task's result data as _prev.
func (cs *chainState) setPrev(data any) {
	delete(cs.Locals, "_prev")
	cs.prev, cs.hasPrev = data, true
}

// takePrev moves _prev into Locals, for a set: that writes under it.
func (cs *chainState) takePrev() {
	if cs.hasPrev {
		cs.local()["_prev"] = cs.prev
		cs.prev, cs.hasPrev = nil, false
	}
}

// empty reports whether the chain has added nothing to its scope yet:
// its view would be the scope as it is.
func (cs *chainState) empty() bool {
	return !cs.hasPrev && len(cs.Locals) == 0 && len(cs.Iter) == 0 && len(cs.Ctx) == 0 && len(cs.Vars) == 0
}

// local returns Locals, made on first use.
func (cs *chainState) local() map[string]any {
	if cs.Locals == nil {
		cs.Locals = map[string]any{}
	}
	return cs.Locals
}

// results is NoETL's pipeline-local results: the result data of each
// named task that has run so far, by name (a task run again after a jump:
// its latest). Nil outside a pipeline and before a named task ran. It is
// built from the locals each task's result is stored under, so a carry
// holds the results once.
func (cs *chainState) results() map[string]any {
	var r map[string]any
	for _, t := range cs.tasks {
		if t.Name == "" {
			continue
		}
		if data, ok := cs.Locals[t.Name]; ok {
			if r == nil {
				r = map[string]any{}
			}
			r[t.Name] = data
		}
	}
	return r
}

// ensure makes the map of namespace ns (iter, ctx or vars) before a set
// writes it.
func (cs *chainState) ensure(ns string) {
	switch {
	case ns == "iter" && cs.Iter == nil:
		cs.Iter = map[string]any{}
	case ns == "ctx" && cs.Ctx == nil:
		cs.Ctx = map[string]any{}
	case ns == "vars" && cs.Vars == nil:
		cs.Vars = map[string]any{}
	}
}

func (cs *chainState) carry() map[string]any {
	c := *cs
	if c.hasPrev {
		c.Locals = copyMap(c.Locals)
		c.Locals["_prev"] = c.prev
	}
	b, _ := json.Marshal(&c)
	var m map[string]any
	// jsonnum, not json.Unmarshal, which would make every number a
	// float64: an id past 2^53 in iter or a local would lose digits.
	_ = jsonnum.Unmarshal(b, &m)
	return m
}

// chainFromCarry restores a pipeline's state from the carry of a retry or
// an awaited sub-playbook (nil: a fresh pipeline).
func chainFromCarry(carry map[string]any) chainState {
	if carry == nil {
		// Every row of a frame starts here without a carry; decoding into
		// a local would move it to the heap for them too.
		return chainState{}
	}
	cs := new(chainState)
	b, _ := json.Marshal(carry)
	_ = jsonnum.Unmarshal(b, cs)
	if p, ok := cs.Locals["_prev"]; ok {
		cs.setPrev(p)
	}
	return *cs
}

// awaitOf returns the *tools.AwaitExecution in err's chain, if any.
// Without an error nothing escapes to the heap: errors.As's target does,
// once per row of a frame otherwise.
func awaitOf(err error) *tools.AwaitExecution {
	if err == nil {
		return nil
	}
	var aw *tools.AwaitExecution
	if errors.As(err, &aw) {
		return aw
	}
	return nil
}

// tasksOf returns the tool chain of a step.
func tasksOf(pb *dsl.Playbook, step *dsl.Step) []*dsl.Task {
	if len(step.Tool) > 0 {
		return step.Tool
	}
	if step.Kind == "workbook" {
		if t := pb.WorkbookTask(step.TaskName); t != nil {
			return []*dsl.Task{t}
		}
	}
	return nil
}

// runChain runs the step's tasks from start under their policies. With
// durable set a retry is handed back to the orchestrator (which schedules
// it in the log); otherwise the worker waits out the backoff itself, as
// rows of a frame do.
func (w *Worker) runChain(ctx context.Context, cmd *Command, step *dsl.Step, scope map[string]any, start, taskAttempt int, carry map[string]any, durable bool) chainResult {
	tasks := tasksOf(cmd.Playbook, step)
	if len(tasks) == 0 {
		return chainResult{failed: true, err: "step has no tool", field: "tool", explicit: true}
	}
	// Iter, Ctx and Vars are made when a set first writes them.
	cs := chainFromCarry(carry)
	if step.Pipeline {
		cs.tasks = tasks
	}
	// The view of the chain's start renders the step's args and timeout,
	// and is the first task's.
	var first map[string]any
	if len(step.Args) > 0 || step.Spec.TimeoutTemplate != nil {
		first = w.view(scope, &cs, 0)
	}
	var args map[string]any
	if len(step.Args) > 0 {
		var err error
		if args, err = dsl.RenderMap(step.Args, first); err != nil {
			return chainResult{failed: true, err: err.Error(), field: "args", explicit: true}
		}
	}
	// An arc's args are the target's arguments, so its tools are called
	// with them too (python's input_data, a noop's data), not only its
	// templates; the step's own args were rendered seeing them and win.
	if len(cmd.Args) > 0 {
		args = overlay(cmd.Args, args)
	}
	timeout, err := step.Spec.ResolveTimeout(first)
	if err != nil {
		return chainResult{failed: true, err: err.Error(), field: "spec.timeout", explicit: true}
	}
	if timeout == 0 {
		timeout = cmd.Playbook.DefaultTimeout
	}
	// A call may park the command (a sub-playbook's) when it is durable,
	// but a parked command has no deadline: with a timeout the call waits
	// for its child here, so that the deadline applies.
	await := durable
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, timeoutReached{timeout})
		defer cancel()
		await = false
	}
	if taskAttempt < 1 {
		taskAttempt = 1
	}
	var output map[string]any
	var outputTask string // the name of the task output came from
	res := chainResult{}
	// A paginating retry resumes at start with the next call's overrides
	// and the earlier pages' contributions.
	nextCall, pages := cmd.NextCall, cmd.Pages
	for ti := start; ti < len(tasks); {
		task := tasks[ti]
		// A workbook call runs under its target's policy, retry, sink and
		// set: the call's where it has them, else the action's.
		eff := task
		if task.Kind == "workbook" && task.Target != nil {
			eff = task.Target
		}
		policy := policyOf(step, eff)
		view := first
		switch {
		case first != nil:
			first = nil
		case policy == nil && len(args) == 0 && cs.empty():
			// Nothing adds to this view (no rules, no args) and nothing of
			// the chain is on top of the scope yet: the view would be a
			// copy of scope unchanged, and scope is the caller's own. A
			// row of a plain cursor loop renders against its row scope.
			view = scope
		default:
			extra := 0
			if policy != nil {
				extra = judgedKeys
			}
			view = w.view(scope, &cs, extra)
		}
		addArgs(view, args)
		out, field, err := w.runTask(ctx, cmd, step, task, view, args, taskAttempt, nextCall, await)
		if aw := awaitOf(err); durable && aw != nil {
			return chainResult{await: &awaitingPayload{ExecutionID: aw.ExecutionID, StartTask: ti, TaskAttempt: taskAttempt, Carry: cs.carry(), NextCall: nextCall}}
		}
		if durable && errors.Is(err, ErrClosed) {
			return chainResult{abandoned: true}
		}
		if err != nil {
			return chainResult{failed: true, err: err.Error(), task: task.Name, field: field, output: out, explicit: true}
		}
		if out["status"] == tools.StatusSuccess && eff.Sink != nil {
			out = w.runSink(ctx, cmd, step, eff.Sink, view, out)
		}
		if rb := retryOf(step, eff); rb != nil {
			if out["status"] == tools.StatusSuccess {
				for _, rule := range rb.Rules {
					if rule.Sink != nil {
						out = w.runSink(ctx, cmd, step, rule.Sink, view, out)
						break
					}
				}
			}
			v, err := decideRetry(rb, view, out, taskAttempt, len(pages)+1)
			if err != nil {
				return chainResult{failed: true, err: err.Error(), task: task.Name, field: "retry", output: out, explicit: true}
			}
			switch {
			case v.again || v.page:
				// A retry of a page calls the same page again; the next page
				// is that call's first attempt.
				req := &retryRequest{StartTask: ti, TaskAttempt: taskAttempt + 1, Delay: v.delay.Seconds(), Carry: cs.carry(), NextCall: nextCall}
				if v.page {
					req.Paging, req.Page, req.NextCall, req.TaskAttempt = true, collectPage(v.rule.Collect, out), v.nextCall, 1
				}
				if durable {
					res := chainResult{output: out, retry: req, task: task.Name}
					if !v.page {
						res.err = errorText(out)
					}
					return res
				}
				if err := sleepCtx(ctx, w.clock(), v.delay); err != nil {
					return chainResult{failed: true, err: err.Error(), task: task.Name, output: out}
				}
				if v.page {
					pages, nextCall = append(pages, req.Page), req.NextCall
				}
				taskAttempt = req.TaskAttempt
				continue
			case v.exhausted && out["status"] == tools.StatusError:
				return chainResult{failed: true, err: fmt.Sprintf("%s (after %d attempts)", errorText(out), taskAttempt), task: task.Name, output: out}
			}
			if c := collectOf(rb); c != nil && out["status"] == tools.StatusSuccess {
				// The last page: the result is every page gathered in order.
				out = withGathered(out, c, gather(c.Strategy, append(slices.Clone(pages), collectPage(c, out))))
			}
		}
		nextCall, pages = nil, nil
		output, outputTask = out, task.Name
		if task.Name != "" {
			// Later tasks read a task's result by its name: its data, as
			// in NoETL (an http task's {status_code, headers, data}).
			cs.local()[task.Name] = out["data"]
		}
		// NoETL's _prev: the previous task's result data, for the next.
		cs.setPrev(out["data"])
		var rule *dsl.Rule
		judged := view // what the rules see: the structured output.error of a failure
		if policy != nil {
			// What the policy's rules read of the outcome (judgedKeys
			// counts these keys). Only they read the view from here on (a
			// rule's then: and set:), so a task without rules (every row
			// of a plain cursor loop) adds nothing to it.
			view["output"] = out
			view["result"] = out["data"]
			view["_attempt"] = taskAttempt
			view["attempt"] = taskAttempt
			if task.Name == "" && !step.Pipeline {
				// A single tool's policy reads its result by the step's
				// name, as the step's own set: does after it.
				view[step.Name] = out["data"]
			}
			judged = policyScope(view, out)
			if rule, err = matchRule(policy, judged); err != nil {
				return chainResult{failed: true, err: err.Error(), task: task.Name, field: "spec.policy", output: out}
			}
		}
		action := dsl.Action{Do: dsl.DoContinue}
		if rule != nil {
			if action, err = rule.Then.Resolve(judged); err != nil {
				return chainResult{failed: true, err: err.Error(), task: task.Name, field: "spec.policy", output: out, explicit: true}
			}
		} else if out["status"] == tools.StatusError {
			action = dsl.Action{Do: dsl.DoFail}
		}
		switch action.Do {
		case dsl.DoRetry:
			if taskAttempt >= retryAttempts(&action) {
				msg := fmt.Sprintf("%s (after %d attempts)", policyErrorText(out, rule, action.Do), taskAttempt)
				return chainResult{failed: true, err: msg, task: task.Name, output: failedOutput(out, msg)}
			}
			delay := backoff(&action, taskAttempt)
			if durable {
				return chainResult{output: out, retry: &retryRequest{StartTask: ti, TaskAttempt: taskAttempt + 1, Delay: delay.Seconds(), Carry: cs.carry(), NextCall: nextCall}, err: errorText(out), task: task.Name}
			}
			if err := sleepCtx(ctx, w.clock(), delay); err != nil {
				return chainResult{failed: true, err: err.Error(), task: task.Name, output: out}
			}
			taskAttempt++
			continue
		case dsl.DoFail:
			msg := policyErrorText(out, rule, action.Do)
			return chainResult{failed: true, err: msg, task: task.Name, output: failedOutput(out, msg), explicit: rule != nil}
		}
		if err := w.assignChain(action.Set, judged, &cs); err != nil {
			return chainResult{failed: true, err: err.Error(), task: task.Name, field: "spec.policy.set", output: out}
		}
		if len(eff.Set) > 0 {
			if err := w.assignChain(eff.Set, w.withOutput(scope, &cs, out), &cs); err != nil {
				return chainResult{failed: true, err: err.Error(), task: task.Name, field: "set", output: out}
			}
		}
		taskAttempt = 1
		switch action.Do {
		case dsl.DoBreak:
			ti = len(tasks)
		case dsl.DoJump:
			if j := taskIndex(tasks, action.To); j >= 0 {
				ti = j
			} else {
				res.jump = action.To
				ti = len(tasks)
			}
		default:
			ti++
		}
	}
	// The step's sink (a loop's per iteration) saves the chain's result,
	// in this command: when it fails, so does the work.
	sink := step.Sink
	if cmd.Kind != KindStep && step.Loop != nil && step.Loop.Sink != nil {
		sink = step.Loop.Sink
	}
	if sink != nil && output != nil && output["status"] == tools.StatusSuccess {
		output = w.runSink(ctx, cmd, step, sink, w.view(scope, &cs, 0), output)
		if output["status"] != tools.StatusSuccess {
			return chainResult{failed: true, err: errorText(output), field: "sink", output: output}
		}
	}
	if cmd.Kind == KindStep {
		output = withTaskResults(output, cs.results(), outputTask)
	}
	res.output = output
	if len(cs.Ctx) > 0 {
		res.ctx = cs.Ctx
	}
	if len(cs.Vars) > 0 {
		res.vars = cs.Vars
	}
	return res
}

// withTaskResults records a pipeline step's task results (see
// chainState.results) in its result, under tasks, so that later steps and
// the step's arcs read step.results.<task> as NoETL's do (stepView). The
// result's own task is not repeated: its data is the result's, and the
// result names the task (task). Nil results leave output as it is.
func withTaskResults(output, results map[string]any, task string) map[string]any {
	if output == nil || results == nil {
		return output
	}
	c := copyMap(output)
	if task != "" {
		delete(results, task)
		c["task"] = task
	}
	c["tasks"] = results
	return c
}

// selectOutput keeps only the keys output_select names of the result's
// data (a mapping); anything else is returned as it is.
func selectOutput(step *dsl.Step, out map[string]any) map[string]any {
	if len(step.OutputSelect) == 0 || out == nil {
		return out
	}
	data, ok := out["data"].(map[string]any)
	if !ok {
		return out
	}
	kept := make(map[string]any, len(step.OutputSelect))
	for _, k := range step.OutputSelect {
		if v, ok := data[k]; ok {
			kept[k] = v
		}
	}
	c := copyMap(out)
	c["data"] = kept
	return c
}

func errorText(out map[string]any) string {
	if e, ok := out["error"].(string); ok && e != "" {
		return e
	}
	if out["error"] != nil {
		return fmt.Sprint(out["error"])
	}
	return "tool reported status " + fmt.Sprint(out["status"])
}

// failedOutput is out as the failure a policy rule decided on: a result
// its tool called a success says error, with msg, as NoETL's output view
// does, so that the step's recorded result agrees with its failure
// (it said status success, error null, for a failed step).
func failedOutput(out map[string]any, msg string) map[string]any {
	if out["status"] == tools.StatusError {
		return out
	}
	f := maps.Clone(out)
	f["status"], f["error"] = tools.StatusError, msg
	return f
}

// policyErrorText is the error of a task a policy rule failed or retried
// to exhaustion: the tool's own error when it reported one, else (its
// result was a success) the rule that decided do.
func policyErrorText(out map[string]any, rule *dsl.Rule, do string) string {
	if rule == nil || out["status"] == tools.StatusError || out["error"] != nil {
		return errorText(out)
	}
	cond := "else"
	if rule.When != nil {
		cond = fmt.Sprintf("when %q", strings.Join(strings.Fields(rule.When.Source), " "))
	}
	return fmt.Sprintf("policy rule %s (%s) decided %s", rule.Pos, cond, do)
}

func taskIndex(tasks []*dsl.Task, name string) int {
	for i, t := range tasks {
		if t.Name == name && name != "" {
			return i
		}
	}
	return -1
}

// view is the scope a task renders against: the command's scope with the
// pipeline's accumulated iter, locals, ctx and vars on top.
// The map has room for extra keys more, which the caller adds.
func (w *Worker) view(scope map[string]any, cs *chainState, extra int) map[string]any {
	// Sized for what it holds, not for every key it might hold: a map of
	// up to 8 entries is one allocation of one group, a larger one a
	// table (a row's view is usually the former).
	n := len(scope) + len(cs.Locals) + extra
	if cs.hasPrev {
		n++
	}
	v := make(map[string]any, n)
	for k, x := range scope {
		v[k] = x
	}
	for k, x := range cs.Locals {
		v[k] = x
	}
	if cs.hasPrev {
		v["_prev"] = cs.prev
	}
	if r := cs.results(); r != nil {
		// A step, workload key or local of that name keeps it.
		if _, taken := v["results"]; !taken {
			v["results"] = r
		}
	}
	if len(cs.Iter) > 0 {
		v["iter"] = overlay(scope["iter"], cs.Iter)
	}
	if len(cs.Ctx) > 0 {
		v["ctx"] = overlay(scope["ctx"], cs.Ctx)
	}
	if len(cs.Vars) > 0 {
		v["vars"] = overlay(scope["vars"], cs.Vars)
	}
	return v
}

// judgedKeys is how many keys runChain adds to a task's view for its
// policy's rules.
const judgedKeys = 5

// policyOf returns the policy that judges a task's outcome: the task's
// own rules (eff is the task, or a workbook call's target), else the
// loop's for its items, else the step's for its single tool; nil when
// none has rules.
func policyOf(step *dsl.Step, eff *dsl.Task) *dsl.Policy {
	policy := eff.Policy
	if policy == nil && step.Loop != nil {
		policy = step.Loop.Policy
	}
	if policy == nil && !step.Pipeline {
		policy = step.Spec.Policy
	}
	return policy
}

// withOutput is the view of a task's own set: entries. There output is
// the task's result (its data, what later tasks read by the task's name),
// as in NoETL, where `x: "{{ output }}"` took the place of _prev; policy
// rules see the whole output instead (status, data, error).
func (w *Worker) withOutput(scope map[string]any, cs *chainState, out map[string]any) map[string]any {
	v := w.view(scope, cs, 2)
	v["output"] = out["data"]
	v["result"] = out["data"]
	return v
}

// assignChain applies set entries inside a pipeline: iter.x to the
// iteration, ctx.x and vars.x to the execution, anything else to a
// pipeline-local name later tasks can read.
func (w *Worker) assignChain(list []*dsl.Assignment, view map[string]any, cs *chainState) error {
	for _, a := range list {
		x, err := a.Value.Render(view)
		if err != nil {
			return fmt.Errorf("set %s: %w", a.Path, err)
		}
		ns, rest := splitNamespace(a.Path)
		cs.ensure(ns)
		switch ns {
		case "iter":
			setPath(cs.Iter, view["iter"], rest, x)
			view["iter"] = overlay(view["iter"], cs.Iter)
		case "ctx":
			setPath(cs.Ctx, view["ctx"], rest, x)
			view["ctx"] = overlay(view["ctx"], cs.Ctx)
		case "vars":
			setPath(cs.Vars, view["vars"], rest, x)
			view["vars"] = overlay(view["vars"], cs.Vars)
		default:
			root, _, _ := strings.Cut(a.Path, ".")
			if root == "_prev" {
				cs.takePrev()
			}
			setPath(cs.local(), nil, a.Path, x)
			view[root] = cs.Locals[root]
		}
	}
	return nil
}

// runTask renders one task's configuration and runs its tool. A returned
// error means the task could not run at all (bad template, unknown kind);
// the field names the configuration key at fault.
//
// await says whether the command can be parked (see tools.Call.Await).
func (w *Worker) runTask(ctx context.Context, cmd *Command, step *dsl.Step, task *dsl.Task, view, args map[string]any, attempt int, nextCall map[string]any, await bool) (map[string]any, string, error) {
	switch {
	case task.Kind == "workbook" && task.Target != nil:
		return w.runAction(ctx, cmd, step, task.Target, view, args, nil, attempt, nextCall, await)
	case step.Kind == "workbook" && len(step.Tool) == 0:
		// A kind: workbook step runs the action itself; its args are the
		// call's input, over the action's defaults and held to the same
		// assert, as a tool call's input is.
		return w.runAction(ctx, cmd, step, task, view, args, args, attempt, nextCall, await)
	}
	return w.runTool(ctx, cmd, step, task, view, args, attempt, nextCall, await)
}

// runTool renders one task's configuration and runs its tool (runTask
// without the workbook call forms).
func (w *Worker) runTool(ctx context.Context, cmd *Command, step *dsl.Step, task *dsl.Task, view, args map[string]any, attempt int, nextCall map[string]any, await bool) (map[string]any, string, error) {
	cfg := make(map[string]any, len(task.Config))
	// When several fields fail, the one reported is the smallest key's.
	var badKey string
	var badErr error
	for k, v := range task.Config {
		x, err := v.Render(view)
		if err != nil {
			if badErr == nil || k < badKey {
				badKey, badErr = k, err
			}
			continue
		}
		cfg[k] = x
	}
	if badErr != nil {
		return nil, badKey, badErr
	}
	applyNextCall(cfg, nextCall)
	tool, err := w.Tools.Lookup(task.Kind)
	if err != nil {
		return nil, "kind", err
	}
	timeout, err := task.ResolveTimeout(view)
	if err != nil {
		return nil, "spec.timeout", err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, timeoutReached{timeout})
		defer cancel()
		await = false // a parked command has no deadline (see runChain)
	}
	// Secret references (from the secrets tool) become secrets only in
	// what this tool receives, and references again in what it returns.
	// The configuration is this task's own, as rendered: it is revealed in
	// a copy only when it holds a reference or a paginating retry's values
	// (which are the command's). The args are shared by the chain's tasks:
	// a tool that takes secrets gets its revealed copy, the others read
	// them as they are, references unrevealed (no tool changes its Call).
	kc := w.keychain(ctx)
	var revealed []tools.Revealed
	takes := tools.TakesSecrets(tool)
	if !takes {
		// Its results come back to the playbook, and a secret with them
		// (tools.SecretTaker).
		if k := secretRefKey(cfg); k != "" {
			return nil, k, fmt.Errorf("%w: a %s task cannot be given a secret (%s holds a secret reference): what it returns comes back to the playbook, "+
				"and the secret, or anything computed from it, would come with it; give %s a credential with auth: instead, or use the secret in an http task",
				tools.ErrSecretNotTaken, task.Kind, k, task.Kind)
		}
	}
	if len(nextCall) > 0 || (takes && tools.HoldsSecretRef(cfg)) {
		revealedCfg, r, err := tools.RevealSecrets(ctx, kc, cfg)
		if err != nil {
			return nil, "secret", err
		}
		cfg, _ = revealedCfg.(map[string]any)
		revealed = r
	}
	if args != nil && takes {
		revealedArgs, moreRevealed, err := tools.RevealSecrets(ctx, kc, args)
		if err != nil {
			return nil, "secret", err
		}
		revealed = append(revealed, moreRevealed...)
		args, _ = revealedArgs.(map[string]any)
	}
	call := &tools.Call{
		ExecutionID: cmd.ExecutionID, CommandID: cmd.Base, Step: step.Name, Task: task.Name, Kind: task.Kind,
		Config: cfg, Args: args, Scope: view, Attempt: attempt, Keychain: kc, Logger: w.logger(), Await: await,
		Revealed: revealed, Partial: partialFunc(ctx, task.Name, revealed),
	}
	out, err := w.executeTool(ctx, tool, call)
	if await && awaitOf(err) != nil || errors.Is(err, ErrClosed) {
		return nil, "", err
	}
	if errors.Is(err, tools.ErrAborted) {
		// Aborted: the task fails at once, past its policy rules.
		if len(revealed) > 0 {
			msg, _ := tools.ConcealSecrets(err.Error(), revealed).(string)
			return nil, "", errors.New(msg)
		}
		return nil, "", err
	}
	if err != nil {
		// The call could not be made; policies still see it as an error.
		out = tools.Output{Status: tools.StatusError, Error: err.Error()}
	}
	if out.Status == tools.StatusError && ctx.Err() != nil {
		// tr is declared here, not for every call: errors.As takes its
		// address, which puts it on the heap.
		var tr timeoutReached
		if errors.As(context.Cause(ctx), &tr) {
			// "context deadline exceeded" says nothing of which deadline.
			out.Error = tr.Error() + ": " + out.Error
		}
	}
	if out.Status == "" {
		out.Status = tools.StatusSuccess
	}
	m := out.Map()
	if len(revealed) > 0 {
		m, _ = tools.ConcealSecrets(m, revealed).(map[string]any)
	}
	return m, "", nil
}

// timeoutReached is the cause of a step's or task's spec.timeout ending
// its context.
type timeoutReached struct{ d time.Duration }

func (t timeoutReached) Error() string { return fmt.Sprintf(timeoutReachedPrefix+"%s reached", t.d) }

// timeoutReachedPrefix starts the error of a call its spec.timeout cut
// (see runTask), which policy rules read as a timeout (timedOut).
const timeoutReachedPrefix = "spec.timeout of "

// executeTool runs tool. A panic in it fails the call, with its stack
// logged, instead of the process: a cursor frame's rows run on goroutines
// of their own, where nothing above would recover it.
func (w *Worker) executeTool(ctx context.Context, tool tools.Tool, call *tools.Call) (out tools.Output, err error) {
	defer func() {
		if r := recover(); r != nil {
			w.logger().Error("tool panicked", "kind", call.Kind, "step", call.Step, "command_id", call.CommandID,
				"panic", r, "stack", string(debug.Stack()))
			out, err = tools.Output{}, fmt.Errorf("tool kind %q panicked: %v", call.Kind, r)
		}
	}()
	return tool.Execute(ctx, call)
}

// secretRefKey returns the first key of cfg, in sorted order, whose value
// holds a secret reference, or "".
func secretRefKey(cfg map[string]any) string {
	var found string
	for k, v := range cfg {
		if (found == "" || k < found) && tools.HoldsSecretRef(v) {
			found = k
		}
	}
	return found
}

// applyNextCall puts a paginating retry's next_call overrides into a
// rendered configuration: a mapping (params, headers, ...) is merged key by
// key, anything else replaced.
func applyNextCall(cfg, nextCall map[string]any) {
	for k, v := range nextCall {
		if over, ok := v.(map[string]any); ok {
			if base, ok := cfg[k].(map[string]any); ok {
				cfg[k] = overlay(base, over)
				continue
			}
		}
		cfg[k] = v
	}
}

// runAction runs a workbook call's target: its inputs are rendered first,
// overlaid with the call's own input (a kind: workbook step's args; nil
// when the call's input is already merged into the target), visible by
// name to the action's templates and checked against assert.expects; its
// result data is checked against assert.returns.
func (w *Worker) runAction(ctx context.Context, cmd *Command, step *dsl.Step, target *dsl.Task, view, args, call map[string]any, attempt int, nextCall map[string]any, await bool) (map[string]any, string, error) {
	var inputs map[string]any
	if in := target.Config["input"]; in != nil {
		x, err := in.Render(view)
		if err != nil {
			return nil, "input", err
		}
		inputs, _ = x.(map[string]any)
	}
	if len(call) > 0 {
		inputs = overlay(inputs, call)
	}
	if err := expectInputs(target, inputs); err != nil {
		return nil, "input", err
	}
	actView := copyMap(view)
	for k, v := range inputs {
		actView[k] = v
	}
	plain := *target
	plain.Kind, plain.Target = target.Kind, nil
	plain.Config = make(map[string]*dsl.Value, len(target.Config))
	for k, v := range target.Config {
		plain.Config[k] = v
	}
	if inputs != nil {
		plain.Config["input"] = dsl.NewLiteralValue(inputs, target.Pos)
	}
	callArgs := copyMap(args)
	for k, v := range inputs {
		callArgs[k] = v
	}
	out, field, err := w.runTool(ctx, cmd, step, &plain, actView, callArgs, attempt, nextCall, await)
	if err != nil {
		return out, field, err
	}
	return checkReturns(target, out), "", nil
}

// actionName is how errors name a workbook action: by the action a call
// targets, else by its own name (a kind: workbook step runs it directly).
func actionName(t *dsl.Task) string {
	if t.Action != "" {
		return t.Action
	}
	return t.Name
}

// expectInputs checks an action's inputs against its assert.expects.
func expectInputs(t *dsl.Task, inputs map[string]any) error {
	if t.Assert == nil {
		return nil
	}
	for _, name := range t.Assert.Expects {
		if inputs[name] == nil {
			return fmt.Errorf("workbook action %s expects input %q (assert.expects)", actionName(t), name)
		}
	}
	return nil
}

// checkReturns turns a successful output whose data lacks a key of the
// action's assert.returns into an error output.
func checkReturns(t *dsl.Task, out map[string]any) map[string]any {
	if t.Assert == nil || out["status"] != tools.StatusSuccess {
		return out
	}
	data, _ := out["data"].(map[string]any)
	for _, key := range t.Assert.Returns {
		if _, ok := data[key]; !ok {
			out = copyMap(out)
			out["status"] = tools.StatusError
			out["error"] = fmt.Sprintf("workbook action %s: result has no %q (assert.returns)", actionName(t), key)
			break
		}
	}
	return out
}

func (w *Worker) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.Default()
}

// sleepUnlessCancelled is sleepCtx that also returns, with a nil error,
// once cancelled is closed.
func sleepUnlessCancelled(ctx context.Context, c clock.Clock, d time.Duration, cancelled <-chan struct{}) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-cancelled:
		return nil
	case <-t.C():
		return nil
	}
}

func sleepCtx(ctx context.Context, c clock.Clock, d time.Duration) error {
	return sleepUnlessCancelled(ctx, c, d, nil) // a nil channel never closes
}
