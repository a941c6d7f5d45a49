package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// Reasons a command is issued again.
const (
	reasonRetry = "retry"
	// reasonLease: the lease of an attempt a worker took (it heartbeated
	// or reported) ran out. Counts toward the command's max_attempts.
	reasonLease = "lease"
	// reasonUntaken: the lease of an attempt no worker took ran out (the
	// workers or the transport were down, or every worker was busy). It
	// does not count toward max_attempts: nothing ran, so nothing failed.
	// Logs written before it existed hold reasonLease for such attempts
	// and fold as they always did.
	reasonUntaken = "lease_untaken"
	reasonResume  = "resume"
	reasonAwait   = "await"
)

// Default bounds for work whose playbook says nothing.
const (
	// DefaultMaxAttempts bounds lease expiries of one frame or command
	// before its rows are dead-lettered or the command fails. Only
	// attempts a worker took count (see reasonUntaken).
	DefaultMaxAttempts = 3
)

func (s *State) loopItemsLimit() int {
	if s.maxLoopItems > 0 {
		return s.maxLoopItems
	}
	return DefaultMaxLoopItems
}

// Decide returns the events that follow from the state at time now, and
// applies them to the state. It is deterministic: the same state, now and
// expired list always give the same events, with the same command ids, so
// a decision made twice (before and after a crash) is recognised by the
// log as a duplicate.
//
// expired lists command ids whose lease ran out (reported by the
// orchestrator's reaper; leases are kept outside the fold so heartbeats do
// not write events), all for reason (lease when empty: attempts a worker
// took). Commands listed with reason resume are re-issued without
// counting toward their attempt limit.
func (s *State) Decide(now time.Time, expired []string, reason string) []eventlog.Event {
	if reason == "" {
		reason = reasonLease
	}
	exps := make([]expiry, len(expired))
	for i, id := range expired {
		exps[i] = expiry{id: id, reason: reason}
	}
	return s.decide(now, exps)
}

// expiry is a command id whose lease ran out, with the reason it is
// issued again: reasonLease (a worker took the attempt), reasonUntaken
// (none did) or reasonResume (the process that drove it is gone).
type expiry struct {
	id, reason string
	// remote, on a resume: the attempt went to a worker elsewhere, which
	// may outlive the process that drove it, its claim still open
	// (issuedPayload.HoldDrain).
	remote bool
}

// decide is Decide with a reason per expired command.
func (s *State) decide(now time.Time, expired []expiry) []eventlog.Event {
	d := &decider{s: s, now: now}
	if s.Status != StatusRunning || s.Playbook == nil {
		return nil
	}
	if s.cancelRequested {
		// Nothing new starts; the execution ends once the commands in
		// flight have reported (their workers were told) or were given up.
		for _, x := range expired {
			d.expireCancelling(x.id, x.reason)
		}
		if s.inflight == 0 {
			d.emit(eventlog.Event{Type: eventlog.TypeExecutionCancelled, Payload: mustJSON(finishedPayload{Reason: "cancel requested"})})
		}
		return d.out
	}
	for _, x := range expired {
		d.expire(x)
	}
	for guard := 0; guard < 1_000_000 && s.Status == StatusRunning; guard++ {
		n := len(d.out)
		for _, run := range append([]string(nil), s.finishing...) {
			d.finish(run)
			if s.Status != StatusRunning {
				return d.out
			}
		}
		d.retries()
		entered := false
		for _, w := range append([]wantedStep(nil), s.wanted...) {
			if !slices.ContainsFunc(s.wanted, func(o wantedStep) bool { return o.Run == w.Run }) || s.joinWaits(w, true) {
				continue // joined into an earlier entry, or waiting at a join
			}
			d.enter(w)
			entered = true
			if s.Status != StatusRunning {
				return d.out
			}
		}
		if !entered && len(s.wanted) > 0 && !s.anyRunning() && !s.joinWaits(s.wanted[0], false) {
			// Joins waiting only on each other (a cycle of waiting
			// steps): the first one goes.
			d.enter(s.wanted[0])
		}
		d.fillLoops()
		if len(d.out) == n {
			break
		}
	}
	if s.Status == StatusRunning && s.idle() {
		d.emit(eventlog.Event{Type: eventlog.TypeExecutionCompleted, Payload: mustJSON(finishedPayload{})})
	}
	return d.out
}

// NextDue returns the earliest time a scheduled retry falls due, or zero.
func (s *State) NextDue() time.Time {
	var due time.Time
	for base := range s.resumableBases() {
		c := s.Commands[base]
		if c != nil && c.Status == cmdRetryWaiting && c.Retry != nil && (due.IsZero() || c.Retry.Due.Before(due)) {
			due = c.Retry.Due
		}
	}
	return due
}

type decider struct {
	s   *State
	now time.Time
	out []eventlog.Event
}

func (d *decider) emit(ev eventlog.Event) {
	ev.ExecutionID = d.s.ExecutionID
	ev.Time = d.now
	if err := d.s.Apply(ev); err != nil {
		// Decided events are built here from valid values; an error means a
		// bug, and the execution must stop rather than diverge.
		d.out = append(d.out, ev)
		d.failExecution("", "", "internal: "+err.Error())
		return
	}
	d.out = append(d.out, ev)
}

func (d *decider) failExecution(step, field, msg string) {
	if d.s.Status != StatusRunning {
		return
	}
	d.emit(eventlog.Event{Type: eventlog.TypeExecutionFailed, Step: step,
		Payload: mustJSON(finishedPayload{Step: step, Field: field, Message: msg})})
}

// enter starts a wanted step: guard, loop or command.
func (d *decider) enter(w wantedStep) {
	step := d.s.Playbook.Step(w.Step)
	if step == nil {
		d.failExecution(w.Step, "next", fmt.Sprintf("no step named %q", w.Step))
		return
	}
	joined, args := d.s.joinedWith(w)
	w.Args = args
	scope := d.s.scope()
	addArgs(scope, w.Args)
	if step.When != nil {
		ok, err := step.When.Truthy(scope)
		if err != nil {
			d.failExecution(step.Name, "when", err.Error())
			return
		}
		if !ok {
			d.emit(eventlog.Event{Type: eventlog.TypeStepSkipped, Step: step.Name,
				Payload: mustJSON(stepDonePayload{Run: w.Run, Joined: joined})})
			return
		}
	}
	if step.Spec.Admit != nil {
		rule, err := matchRule(step.Spec.Admit, scope)
		if err != nil {
			d.failExecution(step.Name, "spec.policy.admit", err.Error())
			return
		}
		if rule != nil && rule.Then.Allow != nil && !*rule.Then.Allow {
			d.emit(eventlog.Event{Type: eventlog.TypeStepSkipped, Step: step.Name,
				Payload: mustJSON(stepDonePayload{Run: w.Run, Joined: joined})})
			return
		}
	}
	if step.Loop == nil {
		base := w.Run
		d.emit(eventlog.Event{Type: eventlog.TypeCommandIssued, Step: step.Name, CommandID: commandID(base, 1), Attempt: 1,
			Payload: mustJSON(issuedPayload{Kind: KindStep, Run: w.Run, Base: base, Args: w.Args, Joined: joined})})
		return
	}
	lp := loopStartedPayload{Run: w.Run, Mode: step.Loop.Mode, Joined: joined}
	maxInFlight, chunkSize, err := step.Loop.ResolveLimits(scope)
	if err != nil {
		d.failExecution(step.Name, fieldOf(err, "loop"), err.Error())
		return
	}
	if step.Loop.Mode == dsl.ModeCursor {
		lp.MaxInFlight = max(1, maxInFlight)
	} else {
		items, err := renderItems(step.Loop.In, scope)
		if limit := d.s.loopItemsLimit(); err == nil && len(items) > limit {
			items, err = nil, fmt.Errorf("%d items are more than a collection loop may hold (%d, Config.MaxLoopItems): use a cursor loop", len(items), limit)
		}
		if err != nil {
			lp.Error = "loop.in: " + err.Error()
		}
		lp.Items = items
		if ref, blob := d.s.res.plan(d.s.ExecutionID+"/"+w.Run+"/items", items); blob != nil {
			// A large collection is stored; item and shard commands carry
			// the reference and their index or range.
			lp.Items, lp.ItemsRef, lp.Count = nil, ref.(map[string]any), len(items)
			d.s.pending = append(d.s.pending, blob)
		}
		switch {
		case step.Loop.Mode == dsl.ModeFanout:
			enterFanout(&lp, step.Loop, len(items), maxInFlight)
		case step.Loop.Mode == dsl.ModeSequential:
			lp.MaxInFlight = 1
		case step.Loop.Mode == dsl.ModeChunked:
			lp.ChunkSize = chunkSize
			lp.MaxInFlight = max(1, maxInFlight)
			if maxInFlight == 0 {
				lp.MaxInFlight = max(1, (len(items)+chunkSize-1)/chunkSize)
			}
		case maxInFlight > 0:
			lp.MaxInFlight = maxInFlight
		default:
			lp.MaxInFlight = max(1, len(items))
		}
	}
	d.emit(eventlog.Event{Type: eventlog.TypeLoopStarted, Step: step.Name, LoopID: w.Run, Payload: mustJSON(lp)})
}

// renderItems renders a loop's collection: a list is its items; null or
// blank text none; anything else (a mapping, a string, a number) one
// item, as NoETL reads it.
func renderItems(v *dsl.Value, scope map[string]any) ([]any, error) {
	if v == nil {
		return nil, fmt.Errorf("no collection")
	}
	x, err := v.Render(scope)
	if err != nil {
		return nil, err
	}
	switch t := x.(type) {
	case nil:
		return []any{}, nil
	case []any:
		return t, nil
	case string:
		if strings.TrimSpace(t) == "" {
			return []any{}, nil
		}
		return []any{t}, nil
	default:
		// One item, as NoETL wraps a mapping (a step's single object) or
		// a scalar it is given to loop over.
		return []any{t}, nil
	}
}

// fillLoops issues item and frame commands up to each loop's bound.
func (d *decider) fillLoops() {
	for _, run := range sortedKeys(d.s.Loops) {
		l := d.s.Loops[run]
		r := d.s.Runs[run]
		if r == nil || r.Status != runRunning || l.Fail != "" || contains(d.s.finishing, run) {
			continue
		}
		if l.Mode == dsl.ModeFanout {
			d.fillShards(run, r, l)
			continue
		}
		if l.Mode == dsl.ModeCursor {
			for i := range l.Slots {
				sl := l.Slots[i]
				if sl.Busy || sl.Drained {
					continue
				}
				base := frameBase(run, i, sl.Frame+1)
				p := issuedPayload{Kind: KindFrame, Run: run, Base: base, Slot: i, Args: r.Args}
				if wait := l.HoldUntil.UnixMilli() - d.now.UnixMilli(); sl.Recheck && wait >= 0 {
					// Its last claim found nothing while a lost attempt's
					// claim may still hold rows: claim after the hold.
					p.HoldMs = wait + 1
				}
				d.emit(eventlog.Event{Type: eventlog.TypeCommandIssued, Step: r.Step, LoopID: run, CommandID: commandID(base, 1),
					Attempt: 1, Frame: sl.Frame + 1, Payload: mustJSON(p)})
			}
			continue
		}
		// A chunked loop's command runs up to Chunk items; the bound is on
		// commands, so on Max chunks of items.
		chunk := max(1, l.Chunk)
		for l.Next-l.Done < l.Max*chunk && l.Next < l.count() {
			base := run + "/i" + strconv.Itoa(l.Next)
			p := issuedPayload{Kind: KindItem, Run: run, Base: base, Index: l.Next, Args: r.Args}
			if l.Chunk > 0 {
				p.Count = min(chunk, l.count()-l.Next)
			}
			d.emit(eventlog.Event{Type: eventlog.TypeCommandIssued, Step: r.Step, LoopID: run, CommandID: commandID(base, 1),
				Attempt: 1, Payload: mustJSON(p)})
		}
	}
}

// retries schedules wanted retries and re-issues those that fell due.
func (d *decider) retries() {
	// Only the few commands with something to do here are sorted, not every
	// command in flight: a loop of a thousand sub-playbooks has a thousand
	// awaiting, and each one's end decides again.
	var bases []string
	for base := range d.s.resumableBases() {
		c := d.s.Commands[base]
		if c == nil || c.Status == cmdRetryWaiting && (c.Retry == nil || c.Retry.Due.After(d.now)) {
			continue
		}
		bases = append(bases, base)
	}
	slices.Sort(bases)
	for _, base := range bases {
		c := d.s.Commands[base]
		switch c.Status {
		case cmdRetryWanted:
			r := c.Failure.Retry
			due := d.now.Add(time.Duration(r.Delay * float64(time.Second)))
			d.emit(eventlog.Event{Type: eventlog.TypeRetryScheduled, Step: d.stepOf(c), CommandID: c.ID(), Attempt: c.Attempt,
				Payload: mustJSON(retryPayload{Run: c.Run, Base: c.Base, Due: due, StartTask: r.StartTask, TaskAttempt: r.TaskAttempt, Carry: r.Carry, NextCall: r.NextCall})})
		case cmdShardRetry:
			p := c.Issued
			p.Reason = reasonShardRetry
			p.StartTask, p.TaskAttempt, p.Carry = 0, 0, nil
			d.reissue(c, p)
		case cmdRetryWaiting:
			d.resume(c, reasonRetry, c.Retry.StartTask, c.Retry.TaskAttempt, c.Retry.Carry, c.Retry.NextCall)
		case cmdAwaitDone:
			// What the command awaited has ended: run its task again,
			// which now finds the outcome.
			d.resume(c, reasonAwait, c.Await.StartTask, c.Await.TaskAttempt, c.Await.Carry, c.Await.NextCall)
		}
	}
}

// resume issues c again to pick its chain up at a task.
func (d *decider) resume(c *commandState, reason string, startTask, taskAttempt int, carry, nextCall map[string]any) {
	p := c.Issued
	p.Reason, p.StartTask, p.TaskAttempt, p.Carry, p.NextCall = reason, startTask, taskAttempt, carry, nextCall
	d.reissue(c, p)
}

func (d *decider) reissue(c *commandState, p issuedPayload) {
	attempt := c.Attempt + 1
	if c.Kind == KindFrame {
		p.Rows, p.Buried = c.frameRows(), c.Buried
	}
	ev := eventlog.Event{Type: eventlog.TypeCommandIssued, Step: d.stepOf(c), CommandID: commandID(c.Base, attempt), Attempt: attempt, Payload: mustJSON(p)}
	if c.Kind != KindStep {
		ev.LoopID = c.Run
	}
	d.emit(ev)
}

func (d *decider) stepOf(c *commandState) string { return d.s.stepOf(c) }

// expired returns the command an expired id names, if it is still the
// current attempt in flight.
func (d *decider) expired(id string) *commandState {
	base, attempt, ok := splitCommandID(id)
	if !ok {
		return nil
	}
	c := d.s.Commands[base]
	if c == nil || c.Attempt != attempt || c.Status != cmdIssued {
		return nil
	}
	return c
}

// expire re-issues a command whose lease ran out, or gives it up. A frame
// given up with recorded rows gets one more attempt that only hands them
// to the source's dead letter; if that attempt is lost too, the rows are
// recorded dead without it (and logged as abandoned). Only attempts a
// worker took count toward the limit: one that no worker took is issued
// again as it was, however often, so an outage of the workers or of the
// transport, however long, costs no attempt (and gives up no row).
func (d *decider) expire(x expiry) {
	c := d.expired(x.id)
	if c == nil {
		return
	}
	reason := x.reason
	p := c.Issued
	p.Reason = reason
	// A hold is the first attempt's: a re-issue claims at once, and
	// holds the drain only for the reasons below.
	p.HoldMs, p.HoldDrain = 0, false
	switch reason {
	case reasonResume:
		// The process died, not the worker: run the same attempt again.
		// A frame's worker elsewhere may still hold a claim it could not
		// record: the drain waits for it, as after a lost attempt. So it
		// does for a frame whose claim set rows aside (Buried): the
		// process may have died before that claim committed, and a leased
		// source then holds them under the dead claimer until its lease
		// runs out; only a later claim moves them to the dead letter (a
		// loop over before that would leave them reported dead, unmoved,
		// and its own consumer group is destroyed with them).
		p.HoldDrain = (x.remote || len(c.Buried) > 0) && c.Kind == KindFrame && d.s.semantics >= semanticsClaimHold
		d.reissue(c, p)
		return
	case reasonUntaken:
		// Nothing ran: the same work again, uncounted (a dead-letter
		// attempt stays one: its rows still go to the dead letter).
		d.reissue(c, p)
		return
	}
	if c.Issued.Settle == SettleDeadLetter {
		d.giveUpFrame(c, OutcomeDead, c.Issued.SettleReason+"; the dead-letter attempt was lost")
		return
	}
	limit := DefaultMaxAttempts
	if st := d.s.Playbook.Step(d.stepOf(c)); st != nil && st.Loop != nil {
		if fs := d.s.frameOf(st); fs.MaxAttempts > 0 {
			limit = fs.MaxAttempts
		}
	}
	if c.Expiries+1 < limit {
		d.reissue(c, p)
		return
	}
	msg := fmt.Sprintf("lease expired %d times", c.Expiries+1)
	switch {
	case c.Kind == KindFrame && len(c.rows) > 0:
		p.Settle, p.SettleReason = SettleDeadLetter, msg
		d.reissue(c, p)
	default:
		// A frame without recorded rows: the source takes back whatever
		// the lost attempts claimed (rolled back, or by its lease); the
		// loop's drain waits for that (State.holdDrain).
		d.giveUp(c, frameDonePayload{Lost: c.Kind == KindFrame && d.s.semantics >= semanticsClaimHold}, msg)
	}
}

// expireCancelling handles a lease that ran out while the execution is
// being cancelled: a frame with recorded rows gets one attempt that only
// releases them (SettleRelease); anything else is given up. An attempt no
// worker took is given up like any other here: a cancel is bounded.
func (d *decider) expireCancelling(id, reason string) {
	c := d.expired(id)
	if c == nil {
		return
	}
	p := c.Issued
	p.Reason = reason
	switch {
	case c.Kind == KindFrame && len(c.rows) > 0 && (c.Issued.Settle == "" || reason == reasonResume):
		if p.Settle == "" {
			p.Settle = SettleRelease
		}
		d.reissue(c, p)
	case c.Kind == KindFrame && len(c.rows) > 0:
		d.giveUpFrame(c, OutcomeError, "execution cancelled; the attempt to release the rows was lost")
	default:
		d.giveUp(c, frameDonePayload{Cancelled: true}, "execution cancelled")
	}
}

// giveUpFrame records a frame's rows given up without the source having
// settled them: dead (their dead-letter attempt was lost) or failed (a
// cancel's release attempt was), and listed as abandoned either way.
func (d *decider) giveUpFrame(c *commandState, outcome, msg string) {
	rows := c.frameRows()
	items := make([]ItemOutcome, len(rows))
	keys := make([]string, len(rows))
	for i, r := range rows {
		items[i] = ItemOutcome{Key: r.Key, Outcome: outcome, Error: msg}
		keys[i] = r.Key
	}
	items = append(items, buriedItems(c.Buried)...)
	d.giveUp(c, frameDonePayload{Items: items, Counts: countOutcomes(items), Abandoned: keys}, msg)
}

// giveUp ends a command in flight without its worker's report: a frame
// with the frame.done given, any other command failed with msg.
func (d *decider) giveUp(c *commandState, frame frameDonePayload, msg string) {
	if c.Kind == KindFrame {
		d.emit(eventlog.Event{Type: eventlog.TypeFrameDone, Step: d.stepOf(c), LoopID: c.Run, CommandID: c.ID(), Attempt: c.Attempt,
			Payload: mustJSON(frame)})
		return
	}
	d.emit(eventlog.Event{Type: eventlog.TypeCommandFailed, Step: d.stepOf(c), CommandID: c.ID(), Attempt: c.Attempt,
		Payload: mustJSON(completedPayload{Error: msg, Field: "lease"})})
}

// finish decides a finished run: its result, assignments and routing.
func (d *decider) finish(runID string) {
	s := d.s
	run := s.Runs[runID]
	if run == nil {
		s.finishing = remove(s.finishing, runID)
		return
	}
	step := s.Playbook.Step(run.Step)
	if l := s.Loops[runID]; l != nil {
		result := d.storeLarge(runID, loopResult(l, d.s.semantics), "data", "results")
		if l.Fail != "" {
			d.fail(step, run, "loop", l.Fail, result)
			return
		}
		if l.Mode == dsl.ModeFanout {
			d.finishFanout(step, run, l)
			return
		}
		p, field, err := d.route(step, run, result, eventlog.TypeLoopDone)
		if err != nil {
			d.failExecution(step.Name, field, err.Error())
			return
		}
		d.keepLastItem(step, l, &p)
		d.emit(eventlog.Event{Type: eventlog.TypeLoopDone, Step: step.Name, LoopID: runID, Payload: mustJSON(p)})
		return
	}
	if run.Failed != nil {
		field := run.Failed.Field
		if run.Failed.Task != "" {
			field = "tool." + run.Failed.Task + ifNotEmpty(".", field)
		}
		d.fail(step, run, field, run.Failed.Error, run.Output)
		return
	}
	var p stepDonePayload
	var field string
	var err error
	if run.Jump != "" {
		p = stepDonePayload{Run: runID, Result: run.Output, Next: []nextStep{{Step: run.Jump}}}
	} else {
		p, field, err = d.route(step, run, run.Output, "call.done")
	}
	if err != nil {
		d.failExecution(step.Name, field, err.Error())
		return
	}
	d.emit(eventlog.Event{Type: eventlog.TypeStepCompleted, Step: step.Name, Payload: mustJSON(p)})
}

// storeLarge replaces the values of result's keys whose encoding is
// larger than the result store's threshold by references to them (for a
// loop's aggregate: its data and results lists). The values are written
// before the decision is appended (State.takePending).
func (d *decider) storeLarge(runID string, result map[string]any, keys ...string) map[string]any {
	if d.s.res == nil || d.s.res.store == nil {
		return result
	}
	out, copied := result, false
	for _, k := range keys {
		v, blob := d.s.res.plan(d.s.ExecutionID+"/"+runID+"/"+k, result[k])
		if blob == nil {
			continue
		}
		if !copied {
			out, copied = copyMap(result), true
		}
		out[k] = v
		d.s.pending = append(d.s.pending, blob)
	}
	return out
}

func ifNotEmpty(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

// fail records a failed step; unless the step says on_error: continue,
// the execution fails with the step, field and message.
func (d *decider) fail(step *dsl.Step, run *stepRun, field, msg string, result map[string]any) {
	if result == nil {
		result = map[string]any{"status": "error", "error": msg}
	}
	if step.Spec.OnError == "continue" || step.Spec.OnError == "ignore" {
		p, f, err := d.route(step, run, result, "call.error")
		if err != nil {
			d.failExecution(step.Name, f, err.Error())
			return
		}
		p.Error, p.Field = msg, field
		if l := d.s.Loops[run.ID]; l != nil {
			d.keepLastItem(step, l, &p)
		}
		d.emit(eventlog.Event{Type: eventlog.TypeStepFailed, Step: step.Name, Payload: mustJSON(p)})
		return
	}
	d.emit(eventlog.Event{Type: eventlog.TypeStepFailed, Step: step.Name,
		Payload: mustJSON(stepDonePayload{Run: run.ID, Result: result, Error: msg, Field: field})})
	d.failExecution(step.Name, field, msg)
}

// keepLastItem adds to p's ctx what NoETL's variables hold after a
// collection loop, which it sets as it issues each item (commands.py):
// the last item issued under the iterator's name and its index as
// loop_index. The step's own set: wins. A stored collection's items are
// not at hand: it keeps loop_index only.
func (d *decider) keepLastItem(step *dsl.Step, l *loopState, p *stepDonePayload) {
	if d.s.semantics < semanticsCallDone || step.Loop == nil || l.Mode == dsl.ModeCursor || l.Mode == dsl.ModeFanout {
		return
	}
	last := min(l.Next, l.count()) - 1
	if last < 0 {
		return
	}
	ctx := map[string]any{"loop_index": last}
	if it := step.Loop.Iterator; it != "" && last < len(l.Items) {
		ctx[it] = l.Items[last]
	}
	maps.Copy(ctx, p.Ctx)
	p.Ctx = ctx
}

// route renders the step's set and vars against its output and picks the
// arcs to follow. It returns the field that failed to render on error.
func (d *decider) route(step *dsl.Step, run *stepRun, output map[string]any, eventName string) (p stepDonePayload, field string, err error) {
	p = stepDonePayload{Run: run.ID, Result: output}
	scope := d.s.scope()
	addArgs(scope, run.Args)
	scope[step.Name] = stepView(output, d.s.semantics)
	scope["output"] = output
	scope["result"] = output["data"]
	scope["event"] = map[string]any{"name": eventName}
	if f, ok := output["fanin"]; ok {
		scope["fanin"] = f
	}
	refNames := []string{step.Name, "output", "result", "fanin"}
	if d.s.semantics >= semanticsStepView {
		// As NoETL's mark_step_completed, before set: and the arcs:
		// ctx.<step> is the step's result unless set: gave ctx that name.
		if _, set := d.s.Ctx[step.Name]; !set {
			wl := overlay(scope["workload"], map[string]any{step.Name: scope[step.Name]})
			scope["workload"], scope["ctx"] = wl, wl
			refNames = append(refNames, "ctx", "workload")
		}
	}
	markRefs(context.Background(), scope, d.s.res, refNames...)
	ctx, vars := map[string]any{}, map[string]any{}
	// NoETL runs a step's set: on call.done only (events.py).
	if eventName != "call.error" || d.s.semantics < semanticsCallDone {
		if err = assign(step.Set, scope, ctx, vars); err != nil {
			return p, "set", err
		}
	}
	for name, v := range step.Vars {
		x, err := v.Render(scope)
		if err != nil {
			return p, "vars." + name, err
		}
		vars[name] = x
	}
	if len(ctx) > 0 || len(vars) > 0 {
		// Arcs see the step's own assignments.
		if d.s.semantics >= semanticsOneStore {
			oneStore(scope, ctx, func(k string) bool {
				_, arg := run.Args[k]
				return arg || k == step.Name || isResult(d.s.Results, k)
			})
			markRefs(context.Background(), scope, d.s.res, slices.Collect(maps.Keys(ctx))...)
			markRefs(context.Background(), scope, d.s.res, "ctx", "workload")
		} else {
			scope["ctx"] = overlay(scope["ctx"], ctx)
		}
		scope["vars"] = overlay(scope["vars"], vars)
	}
	if step.Next != nil {
		matched := false
		defer func() {
			if !matched && err == nil && step.Next.OnNoMatch == dsl.NoMatchError && len(step.Next.Arcs) > 0 {
				field, err = "next", fmt.Errorf("no arc matched (on_no_match: error)")
			}
		}()
		for i, arc := range step.Next.Arcs {
			ok, err := arc.When.Truthy(scope)
			if err != nil {
				return p, fmt.Sprintf("next.arcs[%d].when", i), err
			}
			if !ok {
				continue
			}
			args, err := dsl.RenderMap(arc.Args, scope)
			if err != nil {
				return p, fmt.Sprintf("next.arcs[%d].args", i), err
			}
			if err := assign(arc.Set, scope, ctx, vars); err != nil {
				return p, fmt.Sprintf("next.arcs[%d].set", i), err
			}
			if len(args) == 0 {
				args = nil
			}
			p.Next = append(p.Next, nextStep{Step: arc.Step, Args: args})
			matched = true
			if step.Next.Mode != dsl.NextInclusive {
				break
			}
		}
	}
	if len(ctx) > 0 {
		p.Ctx = ctx
	}
	if len(vars) > 0 {
		p.Vars = vars
	}
	return p, "", nil
}

// fieldOf returns the field a *dsl.FieldError names, else def.
func fieldOf(err error, def string) string {
	var fe *dsl.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return def
}

// loopResult is a finished loop's result envelope. From semanticsStepView
// on, a collection loop's also records NoETL's stats (loopStats), which
// stay inline when its data and results go to the result store, so that
// templates read them without loading those.
func loopResult(l *loopState, semantics int) map[string]any {
	status := "success"
	if l.Fail != "" {
		status = "error"
	}
	if l.Mode == dsl.ModeCursor {
		return map[string]any{"status": status, "error": nilIfEmpty(l.Fail), "data": map[string]any{
			"rows": l.Rows, "ok": l.OK, "failed": l.Failed, "dead": l.Dead, "frames": l.Frames,
		}}
	}
	data := make([]any, len(l.Outputs))
	for i, o := range l.Outputs {
		if m, ok := o.(map[string]any); ok {
			data[i] = m["data"]
		}
	}
	r := map[string]any{"status": status, "error": nilIfEmpty(l.Fail), "data": data, "results": l.Outputs, "count": len(l.Outputs)}
	if semantics >= semanticsStepView {
		r["stats"] = loopStats(l.Outputs)
	}
	return r
}

// loopStats counts a collection loop's finished items as NoETL's
// state.get_loop_aggregation does: total finished, of which success and
// failed (an item whose output's status is error). Items a failed loop
// never ran are not counted.
func loopStats(outputs []any) map[string]any {
	total, failed := 0, 0
	for _, o := range outputs {
		m, ok := o.(map[string]any)
		if !ok {
			continue
		}
		total++
		if m["status"] == tools.StatusError {
			failed++
		}
	}
	return map[string]any{"total": total, "success": total - failed, "failed": failed}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
