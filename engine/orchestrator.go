package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/faultpoint"
)

// ErrStale is returned to a worker whose report carries a fencing token
// (command id and attempt) that is no longer current: the command was
// re-issued, or already finished. The report is not recorded.
var ErrStale = errors.New("engine: stale report: command was re-issued or finished")

// ErrUnknownExecution is returned for an execution this engine does not
// drive.
var ErrUnknownExecution = errors.New("engine: unknown execution")

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
)

type message struct {
	kind  msgKind
	ev    eventlog.Event
	state *State
	list  *[]string
	reply chan error
}

// execution is an execution driven by this orchestrator.
type execution struct {
	state  *State
	leases map[string]*lease
	// cancelSent is when workers were last told of the execution's cancel.
	cancelSent time.Time
}

// lease is an in-flight command's hold on its worker: it is re-issued
// when the deadline passes. A command that has not heartbeated yet (still
// queued, or just started) gets its whole lease; after each heartbeat the
// deadline is missed heartbeat intervals away, never more than the lease.
type lease struct {
	deadline time.Time
	lease    time.Duration
	beat     time.Duration
}

// alive moves the deadline after a sign of life from the worker.
func (l *lease) alive(now time.Time, missed int) {
	d := l.lease
	if l.beat > 0 && time.Duration(missed)*l.beat < d {
		d = time.Duration(missed) * l.beat
	}
	l.deadline = now.Add(d)
}

// cancelRepeat is how often workers are told again of an execution being
// cancelled while its commands are in flight.
const cancelRepeat = 2 * time.Second

// orchestrator appends, folds, decides and dispatches. One goroutine runs
// its loop; everything it owns is touched only there.
type orchestrator struct {
	log      eventlog.Log
	dispatch Dispatcher
	clock    func() time.Time
	logger   *slog.Logger
	lease    time.Duration
	missed   int
	tick     time.Duration
	maxBatch int
	observer Observer
	// onFinish, if set, is called with an execution's id when it ends.
	onFinish func(executionID string)

	inbox chan message
	execs map[string]*execution

	mu       sync.Mutex
	finished map[string]*Summary
	waiters  map[string]chan struct{}
}

func (o *orchestrator) run(ctx context.Context) {
	t := time.NewTicker(o.tick)
	defer t.Stop()
	for {
		var batch []message
		select {
		case <-ctx.Done():
			o.shutdown(ctx.Err())
			return
		case m := <-o.inbox:
			batch = append(batch, m)
		drain:
			for len(batch) < o.maxBatch {
				select {
				case m := <-o.inbox:
					batch = append(batch, m)
				default:
					break drain
				}
			}
		case <-t.C:
		}
		o.step(ctx, batch)
	}
}

func (o *orchestrator) shutdown(err error) {
	for {
		select {
		case m := <-o.inbox:
			if m.reply != nil {
				m.reply <- err
			}
		default:
			return
		}
	}
}

// step handles a batch of messages, decides, appends once, dispatches.
func (o *orchestrator) step(ctx context.Context, batch []message) {
	now := o.clock()
	var pending []eventlog.Event
	var replies []chan error
	touched := map[string]bool{}
	var order []string
	touch := func(id string) {
		if !touched[id] {
			touched[id] = true
			order = append(order, id)
		}
	}
	loaded := map[string][]string{} // execution → in-flight commands to expire on load
	for _, m := range batch {
		switch m.kind {
		case msgReport:
			ex := o.execs[m.ev.ExecutionID]
			if ex == nil {
				m.reply <- fmt.Errorf("%w: %s", ErrUnknownExecution, m.ev.ExecutionID)
				continue
			}
			if !ex.state.Accepts(m.ev) {
				m.reply <- ErrStale
				continue
			}
			ev := m.ev
			ev.Time = now
			if err := ex.state.Apply(ev); err != nil {
				m.reply <- err
				continue
			}
			if ev.Type != eventlog.TypeFrameClaimed {
				delete(ex.leases, ev.CommandID)
			} else if l := ex.leases[ev.CommandID]; l != nil {
				l.alive(now, o.missed)
			}
			pending = append(pending, ev)
			replies = append(replies, m.reply)
			touch(ev.ExecutionID)
		case msgHeartbeat:
			if ex := o.execs[m.ev.ExecutionID]; ex != nil {
				if l := ex.leases[m.ev.CommandID]; l != nil {
					l.alive(now, o.missed)
				}
			}
		case msgStart, msgLoad:
			id := m.state.ExecutionID
			if _, ok := o.execs[id]; ok {
				if m.kind == msgLoad {
					m.reply <- nil // already driven here: nothing to resume
				} else {
					m.reply <- fmt.Errorf("engine: execution %s is already running here", id)
				}
				continue
			}
			ex := &execution{state: m.state, leases: map[string]*lease{}}
			o.execs[id] = ex
			if m.kind == msgStart {
				ev := m.ev
				ev.Time = now
				if err := ex.state.Apply(ev); err != nil {
					delete(o.execs, id)
					m.reply <- err
					continue
				}
				pending = append(pending, ev)
			} else {
				inflight := ex.state.InFlight()
				if o.dispatch.Durable() {
					for _, cid := range inflight {
						d, beat := ex.state.leaseFor(cid, o.lease)
						ex.leases[cid] = &lease{deadline: now.Add(d), lease: d, beat: beat}
					}
				} else {
					loaded[id] = inflight
				}
			}
			replies = append(replies, m.reply)
			touch(id)
		case msgList:
			*m.list = sortedKeys(o.execs)
			m.reply <- nil
		case msgCancel:
			ex := o.execs[m.ev.ExecutionID]
			if ex == nil {
				m.reply <- fmt.Errorf("%w: %s", ErrUnknownExecution, m.ev.ExecutionID)
				continue
			}
			ev := m.ev
			ev.Time = now
			_ = ex.state.Apply(ev)
			pending = append(pending, ev)
			replies = append(replies, m.reply)
			touch(ev.ExecutionID)
		}
	}
	// Decide for every execution that changed, whose lease ran out or
	// whose retry fell due.
	for _, id := range sortedKeys(o.execs) {
		ex := o.execs[id]
		var expired []string
		reason := reasonLease
		if l, ok := loaded[id]; ok {
			expired, reason = l, reasonResume
		}
		for cid, l := range ex.leases {
			if now.After(l.deadline) {
				expired = append(expired, cid)
				delete(ex.leases, cid)
			}
		}
		sort.Strings(expired)
		due := ex.state.NextDue()
		if !touched[id] && len(expired) == 0 && (due.IsZero() || due.After(now)) {
			continue
		}
		if len(expired) > 0 {
			o.logger.Info("re-issuing commands", "execution_id", id, "commands", expired, "reason", reason)
		}
		decided := ex.state.Decide(now, expired, reason)
		o.warnAbandoned(decided)
		pending = append(pending, decided...)
		touch(id)
	}
	if len(pending) == 0 {
		o.reply(replies, nil)
		o.announceCancels(now)
		return
	}
	results, err := o.log.Append(ctx, pending)
	if err != nil {
		o.logger.Error("event log append failed; reloading executions", "error", err, "events", len(pending))
		o.reply(replies, err)
		for _, id := range order {
			o.reload(ctx, id)
		}
		return
	}
	faultpoint.Hit(faultpoint.OrchestratorAppended)
	dup := map[string]bool{}
	for i, r := range results {
		if r.Duplicate {
			dup[pending[i].ExecutionID] = true
		}
	}
	for i := range pending {
		ev := &pending[i]
		if results[i].Duplicate {
			continue
		}
		ev.ID, ev.Seq = results[i].ID, results[i].Seq
		if o.observer != nil {
			o.observer.Observe(*ev)
		}
		ex := o.execs[ev.ExecutionID]
		if ex == nil {
			continue
		}
		if ev.Type == eventlog.TypeCommandIssued {
			cmd := o.command(ex, *ev)
			if cmd != nil {
				ex.leases[cmd.ID] = &lease{deadline: now.Add(cmd.Lease), lease: cmd.Lease, beat: cmd.Heartbeat}
				o.dispatch.Dispatch(cmd)
			}
		}
	}
	o.reply(replies, nil)
	o.announceCancels(now)
	for _, id := range order {
		ex := o.execs[id]
		if ex == nil {
			continue
		}
		if dup[id] {
			// Another orchestrator decided too: our speculative state may
			// hold what the log refused, so rebuild it from the log.
			o.reload(ctx, id)
			continue
		}
		if ex.state.Status != StatusRunning {
			o.finish(id, ex)
		}
	}
}

func (o *orchestrator) reply(replies []chan error, err error) {
	for _, r := range replies {
		if r != nil {
			r <- err
		}
	}
}

// reload rebuilds an execution's state from the log.
func (o *orchestrator) reload(ctx context.Context, id string) {
	events, err := o.log.Read(ctx, id, 0, 0)
	if err != nil {
		o.logger.Error("reload failed", "execution_id", id, "error", err)
		return
	}
	st, err := Fold(id, events)
	if err != nil {
		o.logger.Error("reload failed", "execution_id", id, "error", err)
		return
	}
	if ex := o.execs[id]; ex != nil {
		ex.state = st
		if st.Status != StatusRunning {
			o.finish(id, ex)
		}
	}
}

func (o *orchestrator) finish(id string, ex *execution) {
	delete(o.execs, id)
	if o.onFinish != nil {
		o.onFinish(id)
	}
	sum := summarize(ex.state)
	o.mu.Lock()
	o.finished[id] = sum
	if w := o.waiters[id]; w != nil {
		close(w)
		delete(o.waiters, id)
	}
	o.mu.Unlock()
}

// command builds the command a command.issued event stands for.
func (o *orchestrator) command(ex *execution, ev eventlog.Event) *Command {
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
	cmd := &Command{
		ExecutionID: s.ExecutionID, ID: ev.CommandID, Base: p.Base, Attempt: ev.Attempt, Kind: p.Kind,
		Step: ev.Step, Run: p.Run, Playbook: s.Playbook, Scope: s.scope(), Args: p.Args,
		Index: p.Index, Slot: p.Slot, Frame: ev.Frame, Rows: p.Rows,
		StartTask: p.StartTask, TaskAttempt: p.TaskAttempt, Carry: p.Carry, NextCall: p.NextCall,
		Settle: p.Settle, SettleReason: p.SettleReason,
	}
	cmd.Lease, cmd.Heartbeat = s.leaseFor(ev.CommandID, o.lease)
	cmd.PlaybookSource, cmd.PlaybookFile, cmd.PlaybookHash = s.started.Playbook, s.started.File, s.playbookHash()
	if c := s.Commands[p.Base]; c != nil && len(c.Pages) > 0 {
		cmd.Pages = c.Pages
	}
	if p.Kind == KindItem {
		if l := s.Loops[p.Run]; l != nil && p.Index < len(l.Items) {
			cmd.Item = l.Items[p.Index]
			if p.Count > 0 {
				cmd.Count = p.Count
				cmd.Items = l.Items[p.Index:min(len(l.Items), p.Index+p.Count)]
			}
		}
	}
	if p.Kind == KindFrame {
		if c := s.Commands[p.Base]; c != nil {
			cmd.Rows = c.frameRows()
		}
	}
	cmd.Pool = step.Spec.Pool
	return cmd
}

// send delivers a message to the loop and waits for its reply.
func (o *orchestrator) send(ctx context.Context, m message) error {
	m.reply = make(chan error, 1)
	select {
	case o.inbox <- m:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-m.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Report implements Reporter.
func (o *orchestrator) Report(ctx context.Context, ev eventlog.Event) error {
	return o.send(ctx, message{kind: msgReport, ev: ev})
}

// Heartbeat implements Reporter.
func (o *orchestrator) Heartbeat(ctx context.Context, executionID, commandID string) error {
	select {
	case o.inbox <- message{kind: msgHeartbeat, ev: eventlog.Event{ExecutionID: executionID, CommandID: commandID}}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// announceCancels tells the workers of every execution being cancelled
// whose commands are still in flight, at once after the cancel is
// recorded and again every cancelRepeat (an announcement may be lost).
func (o *orchestrator) announceCancels(now time.Time) {
	for _, id := range sortedKeys(o.execs) {
		ex := o.execs[id]
		if !ex.state.cancelRequested || ex.state.inflight == 0 {
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
