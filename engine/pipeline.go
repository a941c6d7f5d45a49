package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/faultpoint"
)

// The orchestrator's loop is a two-stage pipeline. Messages are folded
// into the in-memory states and decided on at once, into the next batch;
// a batch goes to the log as one append when the append before it has
// returned, and everything folded while that append was in flight goes
// out together (group commit, up to maxBatch messages). The states hold
// the decisions of the batch in flight and of the next one before the log
// does, so nothing leaves the loop on their strength until its own append
// has returned: dispatches, leases, cancel announcements, replies (even
// ErrStale) and finished executions wait for it. An append that fails
// takes the batch decided on top of it down too: the executions both
// touched are reloaded from the log and their reporters hear
// ErrUnavailable. Appends stay in order: one is in flight at a time.

// batch is the work of one append.
type batch struct {
	// msgs counts the messages folded into the batch (bounded by maxBatch).
	msgs    int
	events  []eventlog.Event
	replies []pendingReply
	// touched and order are the executions the batch folded, decided or
	// answered on, in the order first touched.
	touched map[string]bool
	order   []string
	// cut says that the engine's stop cut the batch's append short: no
	// outage, and its reporters hear ErrClosed.
	cut bool
	// cmds holds the commands the batch's command.issued events stand for,
	// by event index, built from the state the batch left when sealed.
	cmds map[int]sealedCommand
	// chained holds, by the index of its command.issued, a command whose
	// frame.claimed the batch records from a worker's claim ahead: it goes
	// to that worker, not to the dispatcher.
	chained map[int]*chainRequest
	// chainFirst holds, by execution and command, the chained frame.done
	// reports the batch accepted; chainDups pairs each with the copies of
	// it the batch got too (a worker resends a report its transport may
	// have lost): they get its answer, not ErrStale, which would have the
	// worker roll back a claim the log records.
	chainFirst map[[2]string]*chainRequest
	chainDups  [][2]*chainRequest
	// results and err are the append's.
	results []eventlog.Result
	err     error
}

// pendingReply is an answer that waits for its batch's append: err if the
// append succeeds, ErrUnavailable if it fails.
type pendingReply struct {
	ch  chan error
	err error
	// list, for a msgList, receives the executions driven when answered.
	list *[]string
	// start, for a msgStart, is the execution it starts.
	start string
}

// sealedCommand is a command built when its batch was sealed, with the
// execution it was built from (dispatched only if that is still the one
// driven when the append returns).
type sealedCommand struct {
	ex  *execution
	cmd *Command
}

func newBatch() *batch { return &batch{touched: map[string]bool{}} }

func (b *batch) touch(id string) {
	if !b.touched[id] {
		b.touched[id] = true
		b.order = append(b.order, id)
	}
}

// answer queues a reply on execution id for when the batch is recorded.
func (b *batch) answer(ch chan error, err error, id string) {
	b.replies = append(b.replies, pendingReply{ch: ch, err: err})
	if id != "" {
		b.touch(id)
	}
}

// idle reports whether the batch has nothing to append or answer.
func (b *batch) idle() bool { return len(b.events) == 0 && len(b.replies) == 0 }

// holds reports whether the batch has events of execution id.
func (b *batch) holds(id string) bool {
	if !b.touched[id] {
		return false
	}
	for i := range b.events {
		if b.events[i].ExecutionID == id {
			return true
		}
	}
	return false
}

func (o *orchestrator) run(ctx context.Context) {
	defer o.markClosed()
	defer close(o.done)
	defer o.ticker.Stop()
	appended := make(chan *batch, 1)
	// One goroutine appends every batch (one at a time: see flying), so
	// the stack a log's append grows to (SQLite's is deep) is grown once,
	// not on a fresh goroutine per batch.
	toAppend := make(chan *batch, 1)
	defer close(toAppend)
	go func() {
		for b := range toAppend {
			b.results, b.err = o.log.Append(ctx, b.events)
			b.cut = b.err != nil && ctx.Err() != nil
			appended <- b
		}
	}()
	o.next = newBatch()
	for {
		inbox := o.inbox
		if o.next.msgs >= o.maxBatch {
			inbox = nil // the next batch is full: wait for the append
		}
		select {
		case <-ctx.Done():
			if o.flying != nil {
				o.safeComplete(<-appended)
			}
			o.abandon(o.next, ErrClosed)
			o.next = newBatch()
			o.shutdown()
			return
		case m := <-inbox:
			o.safeFold(ctx, o.take(m))
		case <-o.ticker.C():
			o.safeFold(ctx, nil)
			o.announceCancels(o.clock.Now())
		case b := <-appended:
			o.safeComplete(b)
			// What queued while the append was in flight joins the next.
			if msgs := o.take(); len(msgs) > 0 {
				o.safeFold(ctx, msgs)
			}
		}
		if o.flying == nil && !o.next.idle() {
			o.seal(ctx, toAppend)
		}
	}
}

// take returns first and what else waits in the inbox, up to what the
// next batch still has room for.
func (o *orchestrator) take(first ...message) []message {
	msgs := first
	for o.next.msgs+len(msgs) < o.maxBatch {
		select {
		case m := <-o.inbox:
			msgs = append(msgs, m)
		default:
			return msgs
		}
	}
	return msgs
}

// shutdown refuses what is still queued.
func (o *orchestrator) shutdown() {
	for {
		select {
		case m := <-o.inbox:
			if m.reply != nil {
				m.reply <- ErrClosed
			}
		default:
			return
		}
	}
}

// safeFold folds msgs into the next batch; a panic that escaped the
// per-execution guards is logged, and the next batch, whose states it may
// have left half-changed, is given up like a failed append.
func (o *orchestrator) safeFold(ctx context.Context, msgs []message) {
	defer func() {
		if r := recover(); r != nil {
			o.logger.Error("orchestrator step panicked", "panic", r, "stack", string(debug.Stack()))
			err := fmt.Errorf("engine: internal error: %v", r)
			for _, m := range msgs {
				if m.reply != nil {
					select {
					case m.reply <- err:
					default: // already answered
					}
				}
			}
			o.abandon(o.next, err)
			o.next = newBatch()
		}
	}()
	o.fold(ctx, o.next, msgs)
}

// fold applies a group of messages to the states, decides, and adds the
// resulting events and replies to b.
func (o *orchestrator) fold(ctx context.Context, b *batch, msgs []message) {
	now := o.clock.Now()
	b.msgs += len(msgs)
	defer o.folded.Add(int64(len(msgs)))
	from := len(b.events)
	touched := map[string]bool{} // decided on in this fold
	touch := func(id string) {
		touched[id] = true
		b.touch(id)
	}
	loaded := map[string][]string{} // execution → in-flight commands to expire on load
	var chains []pendingChain       // frame.done reports with a claim ahead
	// resume takes up the commands a loaded execution has in flight: a
	// durable transport still holds them (leased), the in-process one lost
	// them (issued again now).
	resume := func(x *execution) {
		if o.dispatch.Durable() {
			o.leaseInFlight(x, now)
		} else {
			loaded[x.state.ExecutionID] = x.state.InFlight()
		}
		touch(x.state.ExecutionID)
	}
	for _, m := range msgs {
		switch m.kind {
		case msgReport:
			id := m.ev.ExecutionID
			ex := o.execs[id]
			if ex == nil {
				if o.reloading[id] != nil {
					m.reply <- fmt.Errorf("%w: execution %s is being reloaded from the log", ErrUnavailable, id)
				} else {
					m.reply <- fmt.Errorf("%w: %s", ErrUnknownExecution, id)
				}
				continue
			}
			// The answers below rest on a state that may hold decisions
			// not yet recorded: they wait for the batch's append.
			if ex.state.Status != StatusRunning {
				b.answer(m.reply, fmt.Errorf("%w: %s", ErrUnknownExecution, id), id)
				continue
			}
			if !ex.state.Accepts(m.ev) {
				if first := b.chainFirst[[2]string{id, m.ev.CommandID}]; first != nil && m.chain != nil && m.ev.Type == eventlog.TypeFrameDone {
					// The same chained report twice in one batch: this copy
					// gets the first one's command once the batch has it.
					b.chainDups = append(b.chainDups, [2]*chainRequest{first, m.chain})
					b.answer(m.reply, nil, id)
					continue
				}
				if m.chain != nil && o.chainRecorded(ex, m.ev, m.chain) {
					// A chained report sent again: its claim is on record
					// already, under the command it gets once more.
					b.answer(m.reply, nil, id)
					continue
				}
				b.answer(m.reply, ErrStale, id)
				continue
			}
			ev := limitResult(m.ev, o.maxResultBytes)
			ev.Time = now
			if m.chain != nil {
				if c := ex.state.current(ev); c != nil && ev.Type == eventlog.TypeFrameDone && c.Kind == KindFrame {
					m.chain.slot = c.Issued.Slot
					chains = append(chains, pendingChain{done: ev, req: m.chain})
				}
			}
			if err := ex.state.Apply(ev); err != nil {
				b.answer(m.reply, err, id)
				continue
			}
			if m.chain != nil && ev.Type == eventlog.TypeFrameDone {
				if b.chainFirst == nil {
					b.chainFirst = map[[2]string]*chainRequest{}
				}
				b.chainFirst[[2]string{id, ev.CommandID}] = m.chain
			}
			if l := ex.leases[ev.CommandID]; l != nil {
				// Any report says a worker took the attempt. A claim is a
				// sign of life too; the lease itself goes only once the
				// command's outcome is on record (after the append).
				l.taken = true
				if ev.Type == eventlog.TypeFrameClaimed {
					l.alive(now, o.missed)
				}
			}
			b.events = append(b.events, ev)
			b.answer(m.reply, nil, "")
			touch(id)
			if ev.Type == eventlog.TypeCommandAwaiting {
				// The awaited execution may have ended before its waiter
				// parked.
				if child := ex.state.awaitedBy(ev.CommandID); child != "" {
					b.events = append(b.events, o.loadAwaitedIDs(ctx, ex, []string{child}, now, resume)...)
				}
			}
		case msgHeartbeat, msgVouch:
			err := ErrStale
			if ex := o.execs[m.ev.ExecutionID]; ex != nil {
				if l := ex.leases[m.ev.CommandID]; l != nil && (!ex.cancelRecorded || now.Sub(ex.cancelAt) <= l.lease) {
					l.alive(now, o.missed)
					o.wakeBy(ex, l.deadline) // it may have come forward
					err = nil
				}
			}
			if m.kind == msgVouch {
				m.reply <- err
			}
		case msgStart, msgLoad:
			id := m.state.ExecutionID
			if o.draining {
				m.reply <- ErrClosed
				continue
			}
			if ex, ok := o.execs[id]; ok || (m.kind == msgStart && o.reloading[id] != nil) {
				if m.kind == msgLoad {
					// Already driven here: nothing to resume, but an
					// orphan is cancelled all the same.
					if evs := loadCancel(ex, m.ev, now); len(evs) > 0 {
						b.events = append(b.events, evs...)
						b.answer(m.reply, nil, "")
						touch(id)
					} else {
						m.reply <- nil
					}
				} else {
					// Its execution.started may not be in the log yet, so
					// Start's read of the log cannot have seen it.
					m.reply <- fmt.Errorf("%w: %s is already running here", ErrExecutionExists, id)
				}
				continue
			}
			delete(o.reloading, id)
			ex := o.install(m.state)
			if m.kind == msgStart {
				ev := m.ev
				ev.Time = now
				if err := ex.state.Apply(ev); err != nil {
					o.drop(id)
					m.reply <- err
					continue
				}
				o.link(ex) // execution.started names its parent
				b.events = append(b.events, ev)
				if o.parentGone(ex, m) {
					b.events = append(b.events, loadCancel(ex, eventlog.Event{ExecutionID: id, Type: eventlog.TypeCancelRequested,
						Payload: mustJSON(map[string]string{"reason": "the execution awaiting it ended"})}, now)...)
				}
				b.replies = append(b.replies, pendingReply{ch: m.reply, start: id})
			} else {
				// A resumed orphan (Engine.Resume) is cancelled before its
				// first decision, so none of its work is issued again.
				b.events = append(b.events, loadCancel(ex, m.ev, now)...)
				b.events = append(b.events, o.loadAwaited(ctx, ex, now, resume)...)
				resume(ex)
				b.answer(m.reply, nil, "")
			}
			touch(id)
		case msgList, msgFlush:
			// Answered once what came before it is recorded and
			// dispatched: a round trip through the loop settles it (a
			// flush has no list to fill).
			b.replies = append(b.replies, pendingReply{ch: m.reply, list: m.list})
		case msgCancel:
			id := m.ev.ExecutionID
			ex := o.execs[id]
			if ex == nil {
				m.reply <- fmt.Errorf("%w: %s", ErrUnknownExecution, id)
				continue
			}
			if ex.state.Status != StatusRunning {
				b.answer(m.reply, fmt.Errorf("%w: %s", ErrUnknownExecution, id), id)
				continue
			}
			if ex.state.cancelRequested {
				// Asked already (recorded, or in this batch): nothing
				// more to record; the answer still waits for the batch.
				b.answer(m.reply, nil, id)
				continue
			}
			ev := m.ev
			ev.Time = now
			_ = ex.state.Apply(ev)
			b.events = append(b.events, ev)
			b.answer(m.reply, nil, "")
			touch(id)
		case msgDrain:
			o.draining = true
			m.reply <- nil
		}
	}
	b.events = append(b.events, o.reloadDue(ctx, now, touch)...)
	b.events = append(b.events, o.awaitsEnded(now, touch)...)
	// Decide for every execution that changed, whose lease ran out or
	// whose retry fell due. While draining, nothing new is decided: what
	// is left is decided by whoever resumes the executions.
	if o.draining {
		return
	}
	// The executions to look at: those touched, and those whose lease
	// may have run out or whose retry may have fallen due (wakes).
	look := make(map[string]bool, len(touched))
	for id := range touched {
		look[id] = true
	}
	for _, id := range o.dueWakes(now) {
		look[id] = true
	}
	for _, id := range sortedKeys(look) {
		ex := o.execs[id]
		if ex == nil {
			continue
		}
		var expired []expiry
		for _, cid := range loaded[id] {
			expired = append(expired, expiry{id: cid, reason: reasonResume, remote: o.remoteWorkers})
		}
		for cid, l := range ex.leases {
			if now.After(l.deadline) {
				expired = append(expired, expiry{id: cid, reason: l.expiry()})
				delete(ex.leases, cid)
			}
		}
		sort.Slice(expired, func(i, j int) bool { return expired[i].id < expired[j].id })
		due := ex.state.NextDue()
		if !touched[id] && len(expired) == 0 && (due.IsZero() || due.After(now)) {
			o.schedule(ex) // woken early: a lease moved on since
			continue
		}
		for _, x := range expired {
			if x.reason == reasonUntaken {
				// Not counted as an attempt, so it waits for a worker for
				// ever: say which pool it waits for (a pool no worker
				// serves, a typo, looks like this too).
				o.logger.Warn("no worker took a command before its lease ran out; issuing it again (not counted as an attempt)",
					"execution_id", id, "command_id", x.id, "step", ex.state.stepOfCommand(x.id), "pool", ex.state.poolOfCommand(x.id))
				continue
			}
			o.logger.Info("re-issuing a command", "execution_id", id, "command_id", x.id, "reason", x.reason)
		}
		decided := o.decideSafe(ex, now, expired)
		o.warnAbandoned(decided)
		b.events = append(b.events, decided...)
		touch(id)
		// Its batch's completion schedules it again with the leases it
		// issues; this covers a batch that waits or holds nothing of it.
		o.schedule(ex)
	}
	if len(chains) > 0 {
		issued := issuedFrames(b.events[from:], from)
		for _, c := range chains {
			o.chainClaim(b, issued, c, now)
		}
	}
	b.events = o.resumeAwaiting(b.events, from, now, touch)
}

// chainRecorded reports whether a chained report whose frame.done is no
// longer current was recorded before (its answer lost on the way): the
// slot's next frame is in flight at its first attempt, with exactly the
// report's rows on record. The command is then set on c for the worker.
func (o *orchestrator) chainRecorded(ex *execution, done eventlog.Event, c *chainRequest) bool {
	if done.Type != eventlog.TypeFrameDone {
		return false
	}
	next, ok := nextFrameAfter(done.CommandID, done.Frame)
	if !ok {
		return false
	}
	cs := ex.state.current(eventlog.Event{CommandID: next})
	var claimed frameClaimedRaw
	if cs == nil || cs.Kind != KindFrame || len(cs.rows) == 0 || decode(eventlog.Event{Payload: c.claimed}, &claimed) != nil ||
		!bytes.Equal(cs.rows, claimed.Rows) {
		return false
	}
	ev := eventlog.Event{ExecutionID: done.ExecutionID, Type: eventlog.TypeCommandIssued, Step: done.Step, LoopID: cs.Run,
		CommandID: next, Attempt: 1, Frame: done.Frame + 1, Payload: mustJSON(cs.Issued)}
	c.cmd = o.commandSafe(ex, ev, true)
	return c.cmd != nil
}

// pendingChain is a frame.done folded with a claim ahead, waiting for the
// fold's decisions.
type pendingChain struct {
	done eventlog.Event
	req  *chainRequest
}

// frameSlot names a cursor loop's slot in one execution.
type frameSlot struct {
	execution, loop string
	slot            int
}

// issuedFrames indexes the fresh frame commands (to be claimed, not
// settling recorded rows) that events, the fold's decisions starting at
// index from of the batch, issue: by slot, the batch index of the first.
// Each payload is decoded once, however many chained reports the fold
// holds.
func issuedFrames(events []eventlog.Event, from int) map[frameSlot]int {
	out := map[frameSlot]int{}
	for i, ev := range events {
		if ev.Type != eventlog.TypeCommandIssued {
			continue
		}
		var p issuedPayload
		if decode(ev, &p) != nil || p.Kind != KindFrame || p.Settle != "" || len(p.Rows) > 0 {
			continue
		}
		k := frameSlot{ev.ExecutionID, ev.LoopID, p.Slot}
		if _, ok := out[k]; !ok {
			out[k] = from + i
		}
	}
	return out
}

// chainClaim records a worker's claim ahead (c) if the fold issued the
// next frame of the reported frame's slot (issued, see issuedFrames): a
// frame.claimed under that command follows its command.issued in b, and
// the command goes to the worker instead of the dispatcher once the batch
// is recorded. Otherwise nothing is recorded and the worker gives the
// rows back.
func (o *orchestrator) chainClaim(b *batch, issued map[frameSlot]int, c pendingChain, now time.Time) {
	ex := o.execs[c.done.ExecutionID]
	if ex == nil || ex.state.Status != StatusRunning || c.req.slot < 0 {
		return
	}
	k := frameSlot{c.done.ExecutionID, c.done.LoopID, c.req.slot}
	i, ok := issued[k]
	if !ok {
		return
	}
	delete(issued, k) // one claim per command
	ev := b.events[i]
	claimed := eventlog.Event{
		ExecutionID: ev.ExecutionID, Type: eventlog.TypeFrameClaimed, Step: ev.Step, LoopID: ev.LoopID,
		CommandID: ev.CommandID, Attempt: ev.Attempt, Frame: ev.Frame, WorkerID: c.done.WorkerID,
		Time: now, Payload: c.req.claimed,
	}
	if !ex.state.Accepts(claimed) || ex.state.Apply(claimed) != nil {
		return
	}
	b.events = append(b.events, claimed)
	if b.chained == nil {
		b.chained = map[int]*chainRequest{}
	}
	b.chained[i] = c.req
}

// seal sends the next batch to the log: the stored values its decisions
// refer to are written first, its commands built, and the batch handed to
// the appending goroutine on toAppend (see run), which hands it back once
// appended. A batch with nothing to append is completed at once.
func (o *orchestrator) seal(ctx context.Context, toAppend chan<- *batch) {
	b := o.next
	o.next = newBatch()
	if len(b.events) == 0 {
		o.safeComplete(b)
		return
	}
	// Stored values the decisions refer to are written first: a crash in
	// between leaves an unreferenced object, never a dangling reference.
	// A failed write is an append that failed: nothing of the batch is
	// stored, the executions are loaded again from the log. (Written here,
	// not with the append, so that what is decided next can read them.)
	var blobs []*pendingBlob
	for _, id := range b.order {
		if ex := o.execs[id]; ex != nil {
			blobs = append(blobs, ex.state.takePending()...)
		}
	}
	if err := o.res.write(ctx, blobs); err != nil {
		o.logger.Error("result store write failed; reloading the executions from the log",
			"error", err, "executions", b.order)
		o.abandon(b, fmt.Errorf("%w: result store: %w", ErrUnavailable, err))
		return
	}
	// Commands are built from the state as the batch left it, before
	// anything is folded on top of it.
	for i := range b.events {
		ev := &b.events[i]
		if ev.Type != eventlog.TypeCommandIssued {
			continue
		}
		if ex := o.execs[ev.ExecutionID]; ex != nil {
			if b.cmds == nil {
				b.cmds = map[int]sealedCommand{}
			}
			b.cmds[i] = sealedCommand{ex: ex, cmd: o.commandSafe(ex, *ev, b.chained[i] != nil)}
		}
	}
	o.flying = b
	toAppend <- b // empty: nothing else is flying
}

// safeComplete runs complete; a panic is logged and the loop goes on.
func (o *orchestrator) safeComplete(b *batch) {
	defer func() {
		if r := recover(); r != nil {
			o.logger.Error("orchestrator step panicked", "panic", r, "stack", string(debug.Stack()))
			o.sendReplies(b, fmt.Errorf("engine: internal error: %v", r))
		}
	}()
	o.complete(b)
}

// complete takes a batch whose append has returned: on success its
// commands are dispatched and leased, leases of recorded outcomes go, its
// reporters are answered and ended executions finish; on failure it and
// the batch decided on top of it are given up.
func (o *orchestrator) complete(b *batch) {
	if o.flying == b {
		o.flying = nil
	}
	now := o.clock.Now()
	if b.err != nil {
		// Nothing of this batch is known to be stored: every execution it
		// touched is dropped from memory, its leases kept by nobody, and
		// loaded again from the log. Its reporters hear ErrUnavailable and
		// send again. So are those of the next batch, decided on it.
		var started *eventlog.AlreadyStartedError
		conflict := errors.As(b.err, &started)
		if conflict {
			o.logger.Warn("another process started an execution this batch starts; refusing the start, reloading the batch's other executions from the log",
				"execution_id", started.ExecutionID, "executions", b.order)
		} else if b.cut {
			// The engine's stop cut the append short: no outage. A
			// resume finds in the log whether it was stored.
			o.logger.Info("engine closed with an append in flight; a resume finds in the log whether it was stored",
				"events", len(b.events), "executions", len(b.order))
		} else {
			// Said once per outage: a log away for minutes (a full disk,
			// a server restarting) failed an append every few seconds,
			// each one an ERROR line. The rest go to debug, and the
			// recovery is said with their count.
			level := slog.LevelError
			if o.appendFailures > 0 {
				level = slog.LevelDebug
			}
			o.appendFailures++
			o.logger.Log(context.Background(), level, "event log append failed; reloading the executions from the log",
				"error", b.err, "events", len(b.events), "executions", b.order)
		}
		err := fmt.Errorf("%w: event log: %w", ErrUnavailable, b.err)
		switch {
		case b.cut:
			// The engine is closing: sending again cannot help, and the
			// caller (a Start, a Cancel) hears what any call does then.
			err = fmt.Errorf("%w: the event log append was cut short (%w); a resume finds whether it was stored", ErrClosed, b.err)
		case errors.Is(b.err, eventlog.ErrClosed):
			// Closed under the engine: sending again cannot help.
			err = fmt.Errorf("engine: event log: %w", b.err)
		}
		var starts []string
		if conflict {
			starts = o.refuseStart(b, started.ExecutionID)
		}
		o.abandon(b, err)
		for i := range b.events {
			// A chained command's worker holds its rows and sends its
			// report again; the others wait for the reload.
			sc := b.cmds[i]
			if r := o.reloading[b.events[i].ExecutionID]; r != nil && sc.cmd != nil && b.chained[i] == nil {
				r.issued = append(r.issued, sc.cmd)
			}
		}
		if len(o.next.order) > 0 || !o.next.idle() {
			level := slog.LevelWarn
			if o.appendFailures > 1 || b.cut {
				level = slog.LevelDebug
			}
			o.logger.Log(context.Background(), level, "dropping the decisions made on the failed append", "executions", o.next.order)
			o.abandon(o.next, err)
			o.next = newBatch()
		}
		if conflict {
			// The log refused the batch whole, so none of the executions
			// it started is stored: they are forgotten, not reloaded (the
			// refused one would load the other process's execution and
			// drive it here too). Their Starts may be sent again.
			for _, id := range starts {
				o.drop(id)
			}
		}
		return
	}
	if len(b.events) > 0 {
		o.appends.Add(1)
		o.appended.Add(int64(len(b.events)))
		faultpoint.Hit(faultpoint.OrchestratorAppended)
		if o.appendFailures > 0 {
			o.logger.Info("event log appends go through again", "failed_appends", o.appendFailures)
			o.appendFailures = 0
		}
	}
	var dup map[string]bool
	for i := range b.events {
		ev := &b.events[i]
		if b.results[i].Duplicate {
			if dup == nil {
				dup = map[string]bool{}
			}
			dup[ev.ExecutionID] = true
			continue
		}
		ev.ID, ev.Seq = b.results[i].ID, b.results[i].Seq
		o.observe(*ev)
		ex := o.execs[ev.ExecutionID]
		if ex == nil {
			continue
		}
		switch ev.Type {
		case eventlog.TypeCommandIssued:
			if sc := b.cmds[i]; sc.ex == ex && sc.cmd != nil {
				cmd := sc.cmd
				l := &lease{deadline: now.Add(cmd.Lease), lease: cmd.Lease, beat: cmd.Heartbeat}
				if b.chained[i] != nil {
					// A chained frame's worker holds its rows: it took the
					// command before it was issued, and heartbeats from
					// now on, so a worker that dies meanwhile is found out
					// after missed heartbeats, not after the whole lease.
					l.alive(now, o.missed)
				}
				ex.leases[cmd.ID] = l
				if ch := b.chained[i]; ch != nil {
					// The worker holds the rows: it goes on with the command
					// (answered below, with the batch's replies).
					ch.cmd = cmd
				} else {
					o.dispatch.Dispatch(cmd)
				}
			}
		case eventlog.TypeCommandCompleted, eventlog.TypeCommandFailed, eventlog.TypeFrameDone, eventlog.TypeCommandAwaiting:
			// The outcome is on record (or the command parked): only now
			// may the lease go.
			delete(ex.leases, ev.CommandID)
		case eventlog.TypeCancelRequested:
			if !ex.cancelRecorded {
				ex.cancelRecorded, ex.cancelAt = true, now
				o.cancelling[ex.state.ExecutionID] = struct{}{}
			}
		case eventlog.TypeLoopDone, eventlog.TypeStepFailed:
			o.runEnded(ex, *ev)
		}
	}
	o.sendReplies(b, nil)
	o.announceCancels(now)
	dropNext := false
	for _, id := range b.order {
		ex := o.execs[id]
		if ex == nil {
			continue
		}
		if dup[id] {
			// Another orchestrator decided too: our speculative state may
			// hold what the log refused, so rebuild it from the log (and
			// give up what the next batch decided on it).
			o.unload(id, now, 0)
			dropNext = dropNext || o.next.touched[id]
			continue
		}
		// An execution with events in the next batch ends with it: its
		// state may have ended on decisions not yet recorded.
		if ex.state.Status != StatusRunning && !o.next.holds(id) {
			o.finish(id, ex)
			continue
		}
		// Its leases and retries may have changed with the batch.
		o.schedule(ex)
	}
	if dropNext {
		o.abandon(o.next, fmt.Errorf("%w: another orchestrator decided for the execution; reloading it from the log", ErrUnavailable))
		o.next = newBatch()
	}
}

// refuseStart answers the Start of execution id in b, whose
// execution.started the log refused because another process started id
// first, with ErrExecutionExists (sendReplies then skips it). It returns
// every execution b starts.
func (o *orchestrator) refuseStart(b *batch, id string) (starts []string) {
	for _, r := range b.replies {
		if r.start != "" {
			starts = append(starts, r.start)
		}
		if r.start == id {
			select {
			case r.ch <- fmt.Errorf("%w: %s (started by another process)", ErrExecutionExists, id):
			default:
			}
		}
	}
	return starts
}

// abandon gives up a batch that will not be appended: its reporters hear
// err, and the executions it touched are loaded again from the log.
func (o *orchestrator) abandon(b *batch, err error) {
	o.sendReplies(b, err)
	now := o.clock.Now()
	for _, id := range b.order {
		o.unload(id, now, 0)
	}
}

// sendReplies answers a batch's reporters: each with its own answer when
// err is nil (the batch is recorded), all with err otherwise.
func (o *orchestrator) sendReplies(b *batch, err error) {
	for _, d := range b.chainDups {
		d[1].cmd = d[0].cmd
	}
	b.chainDups, b.chainFirst = nil, nil
	for _, r := range b.replies {
		e := r.err
		if err != nil {
			e = err
		}
		if r.list != nil && !errors.Is(e, ErrClosed) {
			*r.list, e = sortedKeys(o.execs), nil
		}
		select {
		case r.ch <- e:
		default: // already answered (after a panic)
		}
	}
	b.replies = nil
}

// appendStats returns how many appends the orchestrator made and how many
// events they carried.
func (o *orchestrator) appendStats() (appends, events int64) {
	return o.appends.Load(), o.appended.Load()
}

// parentGone reports whether ex, a sub-playbook execution m starts, has
// no parent left to take its outcome: the parent was driven here when
// Start was called and has ended (or been dropped) since.
func (o *orchestrator) parentGone(ex *execution, m message) bool {
	p := ex.state.parent
	if p == "" || !m.parentDriven {
		return false
	}
	if pe := o.execs[p]; pe != nil {
		return pe.state.Status != StatusRunning
	}
	return o.reloading[p] == nil
}

// loadCancel applies ev, the cancel.requested a msgLoad carries for an
// orphaned sub-playbook execution (Engine.Resume), to ex, and returns it
// to append: nothing when the message carries none, or ex has ended or
// was asked to cancel already.
func loadCancel(ex *execution, ev eventlog.Event, now time.Time) []eventlog.Event {
	if ev.Type != eventlog.TypeCancelRequested || ex.state.Status != StatusRunning || ex.state.cancelRequested {
		return nil
	}
	ev.Time = now
	if ex.state.Apply(ev) != nil {
		return nil
	}
	return []eventlog.Event{ev}
}
