package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
)

// ErrStale is returned to a worker whose report carries a fencing token
// (command id and attempt) that is no longer current: the command was
// re-issued, or already finished. The report is not recorded.
var ErrStale = errors.New("engine: stale report: command was re-issued or finished")

// ErrUnknownExecution is returned for an execution this engine does not
// drive.
var ErrUnknownExecution = errors.New("engine: unknown execution")

// ErrNewerSemantics is wrapped by the error Resume returns for an
// execution started by a newer build, under semantics this one does not
// know (an operator rolled back): resuming it here would decide under
// other rules than it was recorded with.
var ErrNewerSemantics = errors.New("engine: execution started by a newer cursorflow")

// ErrRecordedPlaybook is wrapped by the error of folding (Fold, Resume,
// Inspect) an execution whose recorded playbook this build refuses:
// an earlier release accepted and started it, and a rule added since
// refuses it. The error wraps the dsl.ErrorList too.
var ErrRecordedPlaybook = errors.New("engine: recorded playbook refused")

// ErrUnavailable is wrapped by the error a report gets when it could not be
// recorded now — the event log failed, or the execution is being reloaded
// from the log after such a failure. The report was not recorded; sending
// it again later is safe and is what in-process workers do.
var ErrUnavailable = errors.New("engine: report not recorded now, send it again")

// ErrClosed is returned by every call on an Engine after Close or
// Shutdown, and by Wait for an execution still running when the engine
// closed (it can be resumed from the log).
var ErrClosed = errors.New("engine: closed")

// Dispatcher hands commands to workers. It must not block: the
// orchestrator calls it from its loop.
type Dispatcher interface {
	Dispatch(cmd *Command)
	// Durable reports whether a dispatched command outlives this process
	// (a broker keeps it). When false, commands in flight at a restart are
	// re-issued at once on resume instead of after their lease.
	Durable() bool
	// Cancel tells the workers that an execution is being cancelled, so
	// that they stop its commands (Worker.Cancel). The orchestrator calls
	// it once cancel.requested is recorded, and again every few seconds
	// while commands of the execution are in flight, so an announcement
	// may be lost.
	Cancel(executionID string)
}

type msgKind int

const (
	msgReport msgKind = iota
	msgHeartbeat
	msgLoad
	msgStart
	msgCancel
	msgList
	msgDrain
	// msgFlush is answered once everything folded before it is recorded.
	msgFlush
	// msgVouch is answered nil when its command's attempt holds a lease
	// (which it renews, as a heartbeat), ErrStale otherwise (Vouch).
	msgVouch
)

type message struct {
	kind  msgKind
	ev    eventlog.Event
	state *State
	list  *[]string
	// chain, on a frame.done report, carries the rows the worker claimed
	// ahead for its slot's next frame (ReportChained).
	chain *chainRequest
	// parentDriven, on a msgStart of a sub-playbook execution, says that
	// its parent was driven here when Start was called: if it is not any
	// more by the time the start is installed, it ended meanwhile.
	parentDriven bool
	reply        chan error
}

// chainRequest is a worker's claim ahead: the frame.claimed payload of
// rows it holds, uncommitted, for the next frame of the slot whose
// frame.done it reports. If the fold issues that frame, the rows are
// recorded under its command and cmd is set (before the reply) to the
// command the worker goes on with.
type chainRequest struct {
	claimed json.RawMessage
	// slot is the reported frame's slot, read before its frame.done is
	// folded (which drops the command from the state).
	slot int
	cmd  *Command
}

// execution is an execution driven by this orchestrator.
type execution struct {
	state  *State
	leases map[string]*lease
	// cancelSent is when workers were last told of the execution's cancel.
	cancelSent time.Time
	// cancelRecorded is set once the log holds the execution's
	// cancel.requested: only then are workers told (the state may hold it
	// speculatively, decided on a batch still being appended).
	cancelRecorded bool
	// cancelAt is when the cancel was recorded. Heartbeats stop counting
	// one lease later: a command still running then (its tool ignores its
	// context) is given up when its lease runs out, so a cancel is
	// bounded even when a worker's heartbeats outlive its tool's sense.
	cancelAt time.Time
	// cursorRuns holds, per cursor loop run under way, what its latest
	// frame command (or the log, for a run loaded from it) renders the
	// cursor block with, for the driver's clean-up once the run is over
	// (see finish.go).
	cursorRuns map[string]*Command
	// wakeAt is the time of its earliest entry in the orchestrator's wakes
	// not taken yet, or zero (see schedule).
	wakeAt time.Time
}

// lease is an in-flight command's hold on its worker: it is re-issued
// when the deadline passes. A command that has not heartbeated yet (still
// queued, or just started) gets its whole lease; after each heartbeat the
// deadline is missed heartbeat intervals away, never more than the lease.
type lease struct {
	deadline time.Time
	lease    time.Duration
	beat     time.Duration
	// taken is set once a worker showed it runs the attempt (a heartbeat,
	// which workers send as they start, or a frame.claimed), or holds its
	// rows (a chained frame). Only a taken attempt's expiry counts toward
	// max_attempts: one nobody took is re-issued uncounted
	// (reasonUntaken). Kept in memory only, like the deadline; what it
	// decided is recorded in the re-issue's reason.
	taken bool
}

// expiry is the reason l's attempt is issued again once it ran out.
func (l *lease) expiry() string {
	if l.taken {
		return reasonLease
	}
	return reasonUntaken
}

// alive moves the deadline after a sign of life from the worker.
func (l *lease) alive(now time.Time, missed int) {
	l.taken = true
	d := l.lease
	if l.beat > 0 && time.Duration(missed)*l.beat < d {
		d = time.Duration(missed) * l.beat
	}
	l.deadline = now.Add(d)
}

// cancelRepeat is how often workers are told again of an execution being
// cancelled while its commands are in flight.
const cancelRepeat = 2 * time.Second

// Reload backoff after a failed append or a failed reload.
const (
	minReloadBackoff = 50 * time.Millisecond
	maxReloadBackoff = 5 * time.Second
)

// reload is an execution dropped from memory after an append failed: its
// speculative state may hold decisions the log never stored, so it is
// loaded again from the log, retrying with backoff while the log fails.
type reload struct {
	due     time.Time
	backoff time.Duration
	// issued holds the commands whose command.issued was in the failed
	// append. None was dispatched; the log may hold them all the same (an
	// append can fail after its commit), and the reload sends those it
	// finds in flight, as the append would have.
	issued []*Command
}

// orchestrator appends, folds, decides and dispatches. One goroutine runs
// its loop; everything it owns is touched only there, but for the batch
// whose append runs on a goroutine of its own (see pipeline.go).
type orchestrator struct {
	log eventlog.Log
	// appendFailures counts the appends failed in a row (the loop's
	// goroutine only): the first is logged as an error, the rest at
	// debug, and the next append that goes through says how many.
	appendFailures int
	dispatch       Dispatcher
	clock          clock.Clock
	logger         *slog.Logger
	lease          time.Duration
	missed         int
	tick           time.Duration
	maxBatch       int
	maxResultBytes int
	maxLoopItems   int
	renderLimits   dsl.Limits
	// parse is the engine's (Engine.parse): states folded from the log
	// share the playbooks parsed before.
	parse    parseFunc
	observer Observer
	// onFinish, if set, is called with an execution's id when it ends.
	onFinish func(executionID string)
	// finisher, if set, cleans up after cursor loop runs that are over.
	finisher *finisher
	// remoteWorkers: commands go to workers elsewhere (Config.Dispatcher),
	// which outlive this process; on a resume, their frames may still
	// hold claims they could not record.
	remoteWorkers bool
	// decide is (*State).decide; a test may wrap it.
	decide func(s *State, now time.Time, expired []expiry) []eventlog.Event
	// res writes and reads stored results (a nil store keeps them inline).
	res *results

	inbox  chan message
	ticker clock.Ticker
	// flying is the batch whose append is in flight (nil when none);
	// next gathers what is folded and decided meanwhile, on the state
	// flying leaves, to be appended once flying has returned.
	flying, next *batch
	// appends and appended count the appends made and the events they
	// carried, folded the messages folded (for tests and benchmarks: the
	// group-commit ratio, and folding while an append is in flight).
	appends, appended, folded atomic.Int64
	// done is closed when the loop has stopped: every call then fails
	// with ErrClosed. closed ends then too.
	done       chan struct{}
	closed     context.Context
	markClosed context.CancelFunc
	execs      map[string]*execution
	reloading  map[string]*reload
	// children indexes execs by parent execution (State.parent), so that
	// an ending execution finds its running children without a scan of
	// every execution driven here. link and unlink keep it.
	children map[string]map[string]struct{}
	// wakes holds when executions next need a look for a lease running
	// out or a retry falling due (see wake.go); cancelling holds the
	// executions whose cancel is recorded, for announceCancels.
	wakes      wakeHeap
	cancelling map[string]struct{}
	// draining is set by Shutdown: reports are still recorded, nothing
	// new is decided or dispatched.
	draining bool
	// ended lists executions that ended while an execution driven here
	// may await them (by awaiter), for the next step to resume it;
	// orphaned lists awaited executions whose awaiter ended, to cancel.
	ended    map[string][]endedExecution
	orphaned []string

	mu       sync.Mutex
	driving  map[string]bool // executions in execs or reloading, for Wait
	finished *summaryCache
	waiters  map[string]*waiter
}

type endedExecution struct{ id, status string }

// waiter is shared by the Waits on one execution.
type waiter struct {
	ch  chan struct{}
	n   int
	sum *Summary
}

// install makes st an execution driven here.
func (o *orchestrator) install(st *State) *execution {
	if st.Playbook != nil {
		st.Playbook.SetLimits(o.renderLimits)
	}
	st.maxLoopItems = o.maxLoopItems
	st.res = o.res
	ex := &execution{state: st, leases: map[string]*lease{}, cancelRecorded: st.cancelRequested, cursorRuns: map[string]*Command{}}
	if ex.cancelRecorded {
		ex.cancelAt = o.clock.Now()
	}
	o.loadCursorRuns(ex)
	o.execs[st.ExecutionID] = ex
	o.link(ex)
	if ex.cancelRecorded {
		o.cancelling[st.ExecutionID] = struct{}{}
	}
	o.schedule(ex)
	o.mu.Lock()
	o.driving[st.ExecutionID] = true
	o.mu.Unlock()
	return ex
}

// link indexes ex under its parent, once its state names one (install,
// or the fold of its execution.started).
func (o *orchestrator) link(ex *execution) {
	p := ex.state.parent
	if p == "" {
		return
	}
	kids := o.children[p]
	if kids == nil {
		kids = map[string]struct{}{}
		o.children[p] = kids
	}
	kids[ex.state.ExecutionID] = struct{}{}
}

// unlink removes execution id from execs and from the indexes over them
// (its wakes are dropped as they come up).
func (o *orchestrator) unlink(id string) {
	delete(o.cancelling, id)
	if ex := o.execs[id]; ex != nil {
		if p := ex.state.parent; p != "" {
			delete(o.children[p], id)
			if len(o.children[p]) == 0 {
				delete(o.children, p)
			}
		}
	}
	delete(o.execs, id)
}

// drop forgets an execution that never got going.
func (o *orchestrator) drop(id string) {
	o.unlink(id)
	delete(o.reloading, id)
	o.mu.Lock()
	delete(o.driving, id)
	if w := o.waiters[id]; w != nil {
		close(w.ch)
		delete(o.waiters, id)
	}
	o.mu.Unlock()
}

// leaseInFlight gives every command in flight a fresh lease: a worker
// that still runs it reports in time, one that died lets it expire.
func (o *orchestrator) leaseInFlight(ex *execution, now time.Time) {
	for _, cid := range ex.state.InFlight() {
		d, beat := ex.state.leaseFor(cid, o.lease)
		ex.leases[cid] = &lease{deadline: now.Add(d), lease: d, beat: beat}
	}
	o.schedule(ex)
}

// unload drops an execution from memory and schedules its reload from the
// log after backoff (zero: at once).
func (o *orchestrator) unload(id string, now time.Time, backoff time.Duration) {
	if _, ok := o.execs[id]; !ok && o.reloading[id] == nil {
		return
	}
	o.unlink(id)
	r := &reload{due: now.Add(backoff), backoff: max(backoff, minReloadBackoff)}
	if prev := o.reloading[id]; prev != nil {
		r.issued = prev.issued
	}
	o.reloading[id] = r
}

// reloadDue loads again, from the log, the executions whose reload fell
// due, and returns the events their loading decided (await.done).
func (o *orchestrator) reloadDue(ctx context.Context, now time.Time, touch func(string)) (out []eventlog.Event) {
	for _, id := range sortedKeys(o.reloading) {
		r := o.reloading[id]
		if r.due.After(now) || (o.flying != nil && o.flying.touched[id]) {
			// Not yet, or an append of its events is still in flight:
			// read the log once it has returned.
			continue
		}
		events, err := o.log.Read(ctx, id, 0, 0)
		var st *State
		if err == nil && len(events) > 0 {
			st, err = foldParsing(id, events, o.parse)
		}
		if err != nil {
			next := min(r.backoff*2, maxReloadBackoff)
			o.logger.Error("reload from the event log failed; retrying", "execution_id", id, "error", err, "retry_in", r.backoff)
			o.reloading[id] = &reload{due: now.Add(r.backoff), backoff: next, issued: r.issued}
			continue
		}
		delete(o.reloading, id)
		if st == nil {
			// The log never stored the execution (its start failed).
			o.drop(id)
			continue
		}
		ex := o.install(st)
		if st.Status != StatusRunning {
			o.finish(id, ex)
			continue
		}
		lease := func(x *execution) { o.leaseInFlight(x, now); touch(x.state.ExecutionID) }
		out = append(out, o.loadAwaited(ctx, ex, now, lease)...)
		lease(ex)
		for _, cmd := range r.issued {
			if _, inFlight := ex.leases[cmd.ID]; inFlight {
				o.dispatch.Dispatch(cmd)
			}
		}
		o.logger.Info("execution reloaded from the event log", "execution_id", id, "in_flight", len(ex.leases))
	}
	return out
}

// resumeAwaiting looks at the terminal events about to be appended (from
// index from on): a
// command parked on an execution that ends here gets its await.done in
// the same batch, and its execution decides again (which issues the
// command anew). A parent that ends in turn resumes its own parent.
func (o *orchestrator) resumeAwaiting(pending []eventlog.Event, from int, now time.Time, touch func(string)) []eventlog.Event {
	for i := from; i < len(pending); i++ {
		ev := pending[i]
		if !eventlog.IsTerminal(ev.Type) {
			continue
		}
		child := o.execs[ev.ExecutionID]
		if child == nil || child.state.parent == "" {
			continue
		}
		parent := o.execs[child.state.parent]
		if parent == nil || parent.state.Status != StatusRunning {
			continue
		}
		done, ok := parent.state.awaitDone(ev.ExecutionID, child.state.Status, now)
		if !ok {
			continue
		}
		pending = append(pending, done)
		pending = append(pending, o.decideSafe(parent, now, nil)...)
		touch(parent.state.ExecutionID)
	}
	return pending
}

// awaitsEnded resumes the commands parked on executions that ended in an
// earlier step (one reloaded already ended, one that ended before its
// waiter parked), and cancels executions nobody awaits any more. It
// returns the events to append.
func (o *orchestrator) awaitsEnded(now time.Time, touch func(string)) []eventlog.Event {
	var out []eventlog.Event
	for _, parent := range sortedKeys(o.ended) {
		if ex := o.execs[parent]; ex != nil && ex.state.Status == StatusRunning {
			for _, e := range o.ended[parent] {
				if ev, ok := ex.state.awaitDone(e.id, e.status, now); ok {
					out = append(out, ev)
					touch(parent)
				}
			}
		}
		delete(o.ended, parent)
	}
	for _, id := range o.orphaned {
		// One asked to cancel already (a host's Cancel) is not asked again.
		if ex := o.execs[id]; ex != nil && ex.state.Status == StatusRunning && !ex.state.cancelRequested {
			ev := eventlog.Event{ExecutionID: id, Type: eventlog.TypeCancelRequested, Time: now,
				Payload: mustJSON(map[string]string{"reason": "the execution awaiting it ended"})}
			if ex.state.Apply(ev) == nil {
				out = append(out, ev)
				touch(id)
			}
		}
	}
	o.orphaned = nil
	return out
}

// loadAwaited sees to the executions a loaded execution's parked commands
// wait for: one that already ended resumes its command (the returned
// await.done events, applied, to append); one not driven here is loaded
// too (and handed to loaded), so it can end.
func (o *orchestrator) loadAwaited(ctx context.Context, ex *execution, now time.Time, loaded func(*execution)) []eventlog.Event {
	awaited := ex.state.Awaiting()
	ids := make([]string, 0, len(awaited))
	for _, cid := range sortedKeys(awaited) {
		ids = append(ids, awaited[cid])
	}
	return o.loadAwaitedIDs(ctx, ex, ids, now, loaded)
}

// loadAwaitedIDs is loadAwaited for the executions ids only: a command
// that has just parked looks at its own child, not at every child its
// execution awaits (a loop of a thousand sub-playbooks parks a thousand
// times).
func (o *orchestrator) loadAwaitedIDs(ctx context.Context, ex *execution, ids []string, now time.Time, loaded func(*execution)) []eventlog.Event {
	var out []eventlog.Event
	for _, id := range ids {
		if o.execs[id] != nil || o.reloading[id] != nil {
			continue // driven here: its end resumes the command
		}
		events, err := o.log.Read(ctx, id, 0, 0)
		var st *State
		if err == nil && len(events) > 0 {
			st, err = foldParsing(id, events, o.parse)
		}
		switch {
		case err != nil:
			o.logger.Error("cannot load an awaited execution; its waiter is resumed to look again", "execution_id", id, "error", err)
		case st == nil:
			// Never started: resuming the command starts it.
		case st.Status == StatusRunning:
			child := o.install(st)
			out = append(out, o.loadAwaited(ctx, child, now, loaded)...)
			loaded(child)
			o.logger.Info("loaded an awaited execution", "execution_id", id, "awaited_by", ex.state.ExecutionID)
			continue
		}
		status := "unknown"
		if st != nil {
			status = st.Status
		}
		if ev, ok := ex.state.awaitDone(id, status, now); ok {
			out = append(out, ev)
		}
	}
	return out
}

// decideSafe decides for one execution; a panic in decision code fails
// that execution, not the process.
func (o *orchestrator) decideSafe(ex *execution, now time.Time, expired []expiry) (out []eventlog.Event) {
	defer func() {
		if r := recover(); r != nil {
			o.logger.Error("decision panicked; failing the execution", "execution_id", ex.state.ExecutionID,
				"panic", r, "stack", string(debug.Stack()))
			out = append(out, ex.state.failInternal(now, fmt.Sprintf("decision panicked: %v", r)))
		}
	}()
	return o.decide(ex.state, now, expired)
}

// commandSafe builds the command an issued event stands for; a panic fails
// the command's execution instead of the process.
func (o *orchestrator) commandSafe(ex *execution, ev eventlog.Event, chained bool) (cmd *Command) {
	defer func() {
		if r := recover(); r != nil {
			o.logger.Error("building a command panicked", "execution_id", ev.ExecutionID, "command_id", ev.CommandID,
				"panic", r, "stack", string(debug.Stack()))
			cmd = nil
		}
	}()
	return o.command(ex, ev, chained)
}

// observe hands an appended event to the observer, which must not take
// the orchestrator down.
func (o *orchestrator) observe(ev eventlog.Event) {
	if o.observer == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			o.logger.Error("observer panicked", "event", ev.Type, "panic", r)
		}
	}()
	o.observer.Observe(ev)
}

func (o *orchestrator) finish(id string, ex *execution) {
	o.unlink(id)
	if p := ex.state.parent; p != "" {
		o.ended[p] = append(o.ended[p], endedExecution{id: id, status: ex.state.Status})
	}
	orphans := map[string]bool{}
	for _, child := range ex.state.Awaiting() {
		if o.execs[child] != nil {
			orphans[child] = true
		}
	}
	// A child whose calling command has not parked yet (its awaiting
	// report not recorded when the parent ended: a cancel, a failure of
	// another branch) is not among Awaiting, yet it is running here with
	// nobody left to take its outcome.
	for cid := range o.children[id] {
		orphans[cid] = true
	}
	o.orphaned = append(o.orphaned, sortedKeys(orphans)...)
	if o.onFinish != nil {
		o.onFinish(id)
	}
	o.executionEnded(ex)
	sum := summarize(ex.state)
	o.mu.Lock()
	delete(o.driving, id)
	o.finished.put(id, sum, o.clock.Now())
	if w := o.waiters[id]; w != nil {
		w.sum = sum
		close(w.ch)
		delete(o.waiters, id)
	}
	o.mu.Unlock()
}

// command builds the command a command.issued event stands for. A
// chained frame's command goes to the worker that holds its rows, so they
// are not put in it.
func (o *orchestrator) command(ex *execution, ev eventlog.Event, chained bool) *Command {
	s := ex.state
	var p issuedPayload
	if err := decode(ev, &p); err != nil {
		o.logger.Error("bad command.issued", "error", err)
		return nil
	}
	step := s.Playbook.Step(ev.Step)
	if step == nil {
		return nil
	}
	scope, stepVars := s.commandScope()
	cmd := &Command{
		ExecutionID: s.ExecutionID, ID: ev.CommandID, Base: p.Base, Attempt: ev.Attempt, Kind: p.Kind,
		Step: ev.Step, Run: p.Run, Playbook: s.Playbook, Scope: scope, StepVars: stepVars, Args: p.Args,
		Index: p.Index, Slot: p.Slot, Frame: ev.Frame, Rows: p.Rows, Buried: p.Buried,
		StartTask: p.StartTask, TaskAttempt: p.TaskAttempt, Carry: p.Carry, NextCall: p.NextCall,
		Settle: p.Settle, SettleReason: p.SettleReason,
		Lost: p.Kind == KindFrame && len(p.Rows) == 0 && (p.Reason == reasonLease || p.Reason == reasonResume),
		Hold: time.Duration(p.HoldMs) * time.Millisecond,
	}
	cmd.Lease, cmd.Heartbeat = s.leaseFor(ev.CommandID, o.lease)
	cmd.PlaybookSource, cmd.PlaybookFile, cmd.PlaybookHash = s.started.Playbook, s.started.File, s.playbookHash()
	if p.Kind == KindShard {
		if l := s.Loops[p.Run]; l != nil {
			cmd.Shards = l.Shards
			cmd.From, cmd.To = shardRange(l.count(), l.Shards, p.Index)
			if l.ItemsRef != nil {
				cmd.ItemsRef = l.ItemsRef
			} else if cmd.To <= len(l.Items) {
				cmd.Item = l.Items[cmd.From:cmd.To:cmd.To]
			}
		}
	}
	if c := s.Commands[p.Base]; c != nil && len(c.Pages) > 0 {
		cmd.Pages = c.Pages
	}
	if p.Kind == KindItem {
		l := s.Loops[p.Run]
		if l != nil {
			cmd.Length = l.count()
		}
		if l != nil && l.ItemsRef != nil {
			cmd.ItemsRef, cmd.Count = l.ItemsRef, p.Count
		} else if l != nil && p.Index < len(l.Items) {
			cmd.Item = l.Items[p.Index]
			if p.Count > 0 {
				cmd.Count = p.Count
				cmd.Items = l.Items[p.Index:min(len(l.Items), p.Index+p.Count)]
			}
		}
	}
	cmd.LoopVars = s.semantics >= semanticsCallDone
	if p.Kind == KindFrame && s.semantics >= semanticsLoopKey {
		cmd.LoopKey = s.ExecutionID + "/" + p.Run
		// What the run's frames render their cursor block with, without
		// the frame's rows, which would be held until the run ends.
		ex.cursorRuns[p.Run] = &Command{ExecutionID: cmd.ExecutionID, Kind: KindFrame, Step: cmd.Step, Run: cmd.Run,
			Playbook: cmd.Playbook, Scope: cmd.Scope, StepVars: cmd.StepVars, Args: cmd.Args, LoopKey: cmd.LoopKey}
	}
	if p.Kind == KindFrame && !chained {
		if c := s.Commands[p.Base]; c != nil {
			cmd.Rows = c.frameRows()
		}
	}
	cmd.Pool = step.Spec.Pool
	cmd.Labels = step.Spec.WorkerLabels
	return cmd
}

// send delivers a message to the loop and waits for its reply.
func (o *orchestrator) send(ctx context.Context, m message) error {
	_, err := o.sendQueued(ctx, m)
	return err
}

// sendQueued is send, and also reports whether m reached the loop: when
// ctx ends after it did, the loop may still act on m.
func (o *orchestrator) sendQueued(ctx context.Context, m message) (queued bool, err error) {
	if o.stopped() {
		return false, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		// Checked first, since select picks at random among ready cases:
		// a report made on a context the engine's shutdown cancelled (a
		// tool that returned ctx.Err()) must not be recorded, or the
		// command a resume should re-run would be on record as failed.
		return false, err
	}
	m.reply = make(chan error, 1)
	select {
	case o.inbox <- m:
	case <-ctx.Done():
		return false, ctx.Err()
	case <-o.done:
		return false, ErrClosed
	}
	select {
	case err := <-m.reply:
		return true, err
	case <-ctx.Done():
		return true, ctx.Err()
	case <-o.done:
		// The loop answered what it had queued before stopping.
		select {
		case err := <-m.reply:
			return true, err
		default:
			return true, ErrClosed
		}
	}
}

// Report implements Reporter.
func (o *orchestrator) Report(ctx context.Context, ev eventlog.Event) error {
	return o.send(ctx, message{kind: msgReport, ev: ev})
}

// MayChain implements ChainReporter: reports reach the orchestrator in
// the order they are made.
func (o *orchestrator) MayChain() bool { return true }

// ReportChained implements ChainReporter.
func (o *orchestrator) ReportChained(ctx context.Context, done eventlog.Event, claimed json.RawMessage) (*Command, error) {
	ch := &chainRequest{claimed: claimed, slot: -1}
	if err := o.send(ctx, message{kind: msgReport, ev: done, chain: ch}); err != nil {
		return nil, err
	}
	return ch.cmd, nil
}

// Heartbeat implements Reporter.
func (o *orchestrator) Heartbeat(ctx context.Context, executionID, commandID string) error {
	if o.stopped() {
		return ErrClosed
	}
	select {
	case o.inbox <- message{kind: msgHeartbeat, ev: eventlog.Event{ExecutionID: executionID, CommandID: commandID}}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-o.done:
		return ErrClosed
	}
}

// Vouch implements Voucher.
func (o *orchestrator) Vouch(ctx context.Context, executionID, commandID string) error {
	return o.send(ctx, message{kind: msgVouch, ev: eventlog.Event{ExecutionID: executionID, CommandID: commandID}})
}

// stopped reports whether the loop has stopped.
func (o *orchestrator) stopped() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// announceCancels tells the workers of every execution being cancelled
// whose commands are still in flight, at once after the cancel is
// recorded and again every cancelRepeat (an announcement may be lost).
func (o *orchestrator) announceCancels(now time.Time) {
	for _, id := range sortedKeys(o.cancelling) {
		ex := o.execs[id]
		if ex == nil || !ex.cancelRecorded || ex.state.inflight == 0 {
			continue
		}
		if !ex.cancelSent.IsZero() && now.Sub(ex.cancelSent) < cancelRepeat {
			continue
		}
		ex.cancelSent = now
		o.dispatch.Cancel(id)
	}
}

// warnAbandoned logs, loudly, the frames the engine gave up on without
// the source settling their rows: those rows may stay claimed.
func (o *orchestrator) warnAbandoned(decided []eventlog.Event) {
	for _, ev := range decided {
		if ev.Type != eventlog.TypeFrameDone {
			continue
		}
		var p struct {
			Abandoned []string `json:"abandoned"`
		}
		if decode(ev, &p) == nil && len(p.Abandoned) > 0 {
			o.logger.Error("rows given up without the source settling them: they may stay claimed in the source",
				"execution_id", ev.ExecutionID, "command_id", ev.CommandID, "keys", p.Abandoned)
		}
	}
}
