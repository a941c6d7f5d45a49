package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/jsonnum"
	"github.com/cursorflow/cursorflow/resultstore"
)

// Execution statuses.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Step run and command statuses.
const (
	runRunning   = "running"
	runCompleted = "completed"
	runFailed    = "failed"
	runSkipped   = "skipped"

	cmdIssued       = "issued"
	cmdCompleted    = "completed"
	cmdFailed       = "failed"
	cmdRetryWanted  = "retry_wanted"
	cmdRetryWaiting = "retry_waiting"
	// cmdAwaiting: parked until another execution ends; cmdAwaitDone: it
	// ended, the command is to be issued again.
	cmdAwaiting  = "awaiting"
	cmdAwaitDone = "await_done"
	// cmdShardRetry is a failed fan-out shard to be issued again.
	cmdShardRetry = "shard_retry"
)

// State is an execution's state: a pure fold over its events. Apply is the
// only way it changes, so two processes that read the same events hold the
// same State.
type State struct {
	// parse parses the playbook execution.started recorded, when the
	// state was not built by Start (which holds it parsed); nil is
	// dsl.Parse. An engine passes its cache of parsed playbooks
	// (Engine.parse), so executions of one source resumed together
	// parse it once.
	parse       parseFunc
	ExecutionID string
	Status      string
	// Failure describes why the execution failed (Status failed).
	Failure finishedPayload
	// Workload is the execution's workload, overrides applied.
	Workload map[string]any
	Ctx      map[string]any
	Vars     map[string]any
	// Results holds each finished step's result under its name.
	Results map[string]any
	// Runs holds the step runs under way; a finished run leaves only its
	// step's last status (steps) behind.
	Runs map[string]*stepRun
	// Commands holds the latest attempt of each unit of work, by base id.
	Commands map[string]*commandState
	// Loops holds the loops under way; a finished loop leaves only its
	// counts (doneLoops), so a long-lived execution that loops back stays
	// as small as the work it has in hand.
	Loops map[string]*loopState
	// LastSeq is the Seq of the last applied event; Events counts them.
	LastSeq int64
	Events  int64
	// StartedAt, EndedAt and UpdatedAt are the times of execution.started,
	// of the terminal event and of the last event applied. Decisions never
	// read them; they are for people watching.
	StartedAt, EndedAt, UpdatedAt time.Time
	// Playbook is parsed from execution.started; it is not part of the
	// fold's data, only its interpretation.
	Playbook *dsl.Playbook
	started  startedPayload
	parent   string
	hash     string

	cancelRequested bool
	// semantics is the execution's recorded semantics (see join.go).
	semantics int
	// reach caches the workflow graph's reachability (join barrier).
	reach    map[[2]string]bool
	runCount map[string]int
	// steps holds, per step, the number and status of its last finished
	// run.
	steps map[string]finishedRun
	// doneLoops holds the counts of each loop step's last finished loop,
	// by run id.
	doneLoops map[string]LoopStatus
	// refNames lists the scope variables (step results, ctx, vars) that
	// hold references to stored results; res reads them. Neither is
	// part of the fold's data: res is the process's result store.
	refNames map[string]bool
	res      *results
	// pending are stored values decisions referred to, to be written
	// before the decisions are appended (see takePending).
	pending []*pendingBlob
	// wanted lists step entries routed to but not yet entered, in order.
	wanted []wantedStep
	// finishing lists runs whose work ended and that await their step
	// completion decision, in order.
	finishing []string
	// inflight counts commands issued and not yet finished.
	inflight int
	// views holds each step's view (stepView of its result), made when a
	// command's scope first needs it and dropped when the step's result
	// changes: a scope holds every step's view, and making them all for
	// every command cost each step of a long playbook in proportion to
	// the steps before it. Views are shared, never changed (setPath
	// copies what it writes under).
	views map[string]any
	// resumable holds the bases of the commands the decider has something
	// to do for (resumableStatus), so that a decision does not look at
	// every command in flight: a loop of a thousand sub-playbooks parks a
	// thousand. Nil until first needed (resumableBases builds it from
	// Commands); setStatus keeps it from then on.
	resumable map[string]struct{}
	// awaiters holds, for each execution commands are parked on, the
	// bases of those commands, and maybe of some no longer parked on it
	// (awaitDone checks each and drops those): a child's end does not
	// look at every command of its parent, which a fan-out of a thousand
	// children made quadratic. Nil until first needed (awaitDone builds
	// it from Commands, as a state restored from a snapshot needs).
	awaiters map[string][]string
	// maxLoopItems bounds a collection loop's items (0: DefaultMaxLoopItems).
	maxLoopItems int
}

type finishedRun struct {
	N      int
	Status string
}

type wantedStep struct {
	Run  string
	Step string
	Args map[string]any
}

type stepRun struct {
	ID     string
	Step   string
	Status string
	Args   map[string]any
	// Base is the current command's base id for a plain step.
	Base string
	// Failed holds the failure to report when the run finishes failed.
	Failed *completedPayload
	// Output is the chain's output for a plain step.
	Output map[string]any
	Jump   string
}

type commandState struct {
	Base    string
	Run     string
	Kind    string
	Attempt int
	Status  string
	Issued  issuedPayload
	// IssuedAt is the event time of the latest attempt's command.issued.
	IssuedAt time.Time
	// rows are a frame's claimed rows as recorded (JSON), see frameRows.
	rows json.RawMessage
	// Buried are the keys of the rows a frame's claim set aside, as
	// recorded with its rows.
	Buried  []string `json:",omitempty"`
	Retry   *retryPayload
	Failure *completedPayload
	// Await is what an awaiting command waits for and resumes with.
	Await *awaitingPayload
	// Pages are the contributions of a paginating retry's pages so far.
	Pages []any
	// Expiries counts re-issues after the lease of an attempt a worker
	// took expired (reason lease); re-issues of attempts no worker took
	// (reason lease_untaken) are not counted.
	Expiries int
	// ShardRetries counts a fan-out shard's re-issues after it failed.
	ShardRetries int
}

// frameRows decodes a frame's recorded rows (nil if none were recorded).
func (c *commandState) frameRows() []FrameRow {
	if len(c.rows) == 0 {
		return nil
	}
	var rows []FrameRow
	if err := unmarshal(c.rows, &rows); err != nil {
		return nil
	}
	return rows
}

// ID is the command id of the latest attempt: the fencing token.
func (c *commandState) ID() string { return commandID(c.Base, c.Attempt) }

func commandID(base string, attempt int) string { return base + "@" + strconv.Itoa(attempt) }

// frameBase is the base of a cursor loop's frame command: run, slot and
// the slot's frame number.
func frameBase(run string, slot, frame int) string {
	return run + "/s" + strconv.Itoa(slot) + ".f" + strconv.Itoa(frame)
}

// nextFrameID is the id of the command a slot's next frame is first issued
// under, after the frame of command cmd.
func nextFrameID(cmd *Command) string {
	return commandID(frameBase(cmd.Run, cmd.Slot, cmd.Frame+1), 1)
}

// nextFrameAfter is nextFrameID from a frame command's id (any attempt)
// and its frame number, for a command no longer in the state; ok is false
// for an id that is not a frame's.
func nextFrameAfter(id string, frame int) (string, bool) {
	base, _, ok := splitCommandID(id)
	i := strings.LastIndex(base, ".f")
	if !ok || i < 0 {
		return "", false
	}
	return commandID(base[:i]+".f"+strconv.Itoa(frame+1), 1), true
}

// splitCommandID splits "base@attempt".
func splitCommandID(id string) (base string, attempt int, ok bool) {
	i := strings.LastIndexByte(id, '@')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil {
		return "", 0, false
	}
	return id[:i], n, true
}

// cancelledError is the error of a command a cancel stopped as it ran.
const cancelledError = "execution cancelled"

type loopState struct {
	Run  string
	Mode string
	Max  int
	// Collection loops: the items, or a reference to them (ItemsRef, with
	// Count items) when they were stored.
	Items    []any
	ItemsRef map[string]any `json:",omitempty"`
	Count    int            `json:",omitempty"`
	Chunk    int
	Next     int
	Outputs  []any
	// Done counts finished items (collection loops), Failed below those
	// of them that failed.
	Done int
	// Fan-out loops: Shards commands, each ending in Done, as OK or
	// Failed; Outputs holds each shard's output.
	Shards int `json:",omitempty"`
	// Cursor loops.
	Slots  []slotState
	Frames int
	Rows   int
	OK     int
	Failed int
	Dead   int
	// Abandoned counts recorded rows the engine gave up on that stay
	// claimed in the source (frame.done's abandoned).
	Abandoned int `json:",omitempty"`
	// Cancelled counts the items (collection loops), shards (fan-out
	// loops) or rows (cursor loops) among Done and Failed that a cancel
	// stopped as they ran (their command, or row, failed with
	// cancelledError after cancel.requested).
	// It only describes (Inspect): Done and Failed, which decisions
	// read, count them all the same.
	Cancelled int `json:",omitempty"`
	// Unreleased counts failed rows left claimed in the source because
	// the cursor has no release statement (frame.done's unreleased).
	Unreleased int `json:",omitempty"`
	// Returned counts rows handed back without an outcome (frame.done's
	// returned).
	Returned int `json:",omitempty"`
	// HandedBack counts, by row key, the failures of rows that went back
	// to the source afterwards (released) to be claimed again; see
	// State.countHandedBack.
	HandedBack map[string]int `json:",omitempty"`
	// Deliveries (semanticsDeliveries) follows, by row key, the delivery
	// numbers the source reported for those failures.
	Deliveries map[string]*deliveries `json:",omitempty"`
	// Fail is the first unhandled failure; the loop stops issuing work.
	Fail string
	// StartedAt is loop.started's time and ProgressAt the time of the
	// last item or frame that finished, for the loop's rate.
	StartedAt, ProgressAt time.Time
	// HoldUntil (cursor loops, semanticsClaimHold) is when the source has
	// taken back whatever a lost frame attempt claimed and never recorded:
	// a claim that may have been made before it and found no rows does
	// not drain its slot (holdDrain). It is compared in whole
	// milliseconds, with a millisecond to spare where it decides a wait
	// (fillLoops), so that a log keeping times to the microsecond folds
	// it as it was decided.
	HoldUntil time.Time `json:",omitempty"`
	// Exclusive (cursor loops): a frame.done said the loop's source runs
	// one claim at a time (frame.done's exclusive), so a lost attempt
	// holds no rows a claim cannot find: the loop does not hold.
	Exclusive bool `json:",omitempty"`
}

// count is the number of items of a collection loop.
func (l *loopState) count() int {
	if l.ItemsRef != nil {
		return l.Count
	}
	return len(l.Items)
}

type slotState struct {
	Frame   int
	Busy    bool
	Drained bool
	// Recheck: the slot's last claim found no rows before the loop's
	// HoldUntil; its next frame claims once the hold is over.
	Recheck bool `json:",omitempty"`
}

// NewState returns the empty state of an execution.
func NewState(executionID string) *State {
	return &State{
		ExecutionID: executionID,
		Ctx:         map[string]any{},
		Vars:        map[string]any{},
		Results:     map[string]any{},
		Runs:        map[string]*stepRun{},
		Commands:    map[string]*commandState{},
		Loops:       map[string]*loopState{},
		runCount:    map[string]int{},
		steps:       map[string]finishedRun{},
		doneLoops:   map[string]LoopStatus{},
	}
}

// parseFunc parses a playbook's source, as dsl.Parse does.
type parseFunc func(file string, src []byte) (*dsl.Playbook, error)

// Fold builds a State from an execution's events.
func Fold(executionID string, events []eventlog.Event) (*State, error) {
	return foldParsing(executionID, events, nil)
}

// foldParsing is Fold with the recorded playbook parsed by parse (nil:
// dsl.Parse); see State.parse.
func foldParsing(executionID string, events []eventlog.Event, parse parseFunc) (*State, error) {
	s := NewState(executionID)
	s.parse = parse
	for i := range events {
		if err := s.Apply(events[i]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Apply folds one event into the state. An event that does not fit the
// state (a corrupt or hand-made history) is an error, never a panic.
//
// A decided event that the state has already moved past — a second
// step.completed for a run that already finished, as a deposed leader's
// late append could leave — changes nothing: each decision folds once.
func (s *State) Apply(ev eventlog.Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine: execution %s: event %d (%s): internal error: %v", s.ExecutionID, ev.Seq, ev.Type, r)
		}
	}()
	if ev.Seq > s.LastSeq {
		s.LastSeq = ev.Seq
	}
	s.Events++
	if ev.Time.After(s.UpdatedAt) {
		s.UpdatedAt = ev.Time
	}
	switch ev.Type {
	case eventlog.TypeExecutionStarted:
		var p startedPayload
		if err := decode(ev, &p); err != nil {
			return err
		}
		if s.Playbook == nil {
			// A state built by Start already holds the parsed playbook;
			// one rebuilt from the log parses the recorded source.
			parse := s.parse
			if parse == nil {
				parse = dsl.Parse
			}
			pb, err := parse(p.File, []byte(p.Playbook))
			if err != nil {
				// A build that refuses what an earlier one accepted and
				// recorded (a bound added since) cannot replay it: say
				// so, and where the execution can still be finished.
				return fmt.Errorf("%w: execution %s: this build refuses the playbook it was started with (the release that started it accepted it); finish it with that release: %w", ErrRecordedPlaybook, s.ExecutionID, err)
			}
			s.Playbook = pb
		}
		s.started = p
		s.semantics = p.Semantics
		s.parent = p.Parent
		s.Status = StatusRunning
		s.StartedAt = ev.Time
		s.Workload = p.Workload
		if s.Workload == nil {
			s.Workload = map[string]any{}
		}
		for k, v := range p.Vars {
			s.Vars[k] = v
		}
		s.want(s.Playbook.Entry, nil)
	case eventlog.TypeStepSkipped, eventlog.TypeStepCompleted, eventlog.TypeStepFailed, eventlog.TypeLoopDone, eventlog.TypeLoopFaninCompleted:
		var p stepDonePayload
		if err := decode(ev, &p); err != nil {
			return err
		}
		run := s.Runs[p.Run]
		if run == nil {
			if !s.isWanted(p.Run) {
				return nil // the run finished already: a repeated decision
			}
			// A skipped step never started a run.
			run = s.startRun(p.Run, ev.Step, nil)
		}
		if run.Status != runRunning {
			return nil
		}
		s.consumeWanted(p.Joined)
		switch ev.Type {
		case eventlog.TypeStepSkipped:
			run.Status = runSkipped
		case eventlog.TypeStepFailed:
			run.Status = runFailed
		case eventlog.TypeLoopFaninCompleted:
			// A fan-in whose failed shards the step does not allow ends
			// it failed (and says why).
			run.Status = runCompleted
			if p.Error != "" {
				run.Status = runFailed
			}
		default:
			run.Status = runCompleted
		}
		// NoETL stores no result for a step that ended in call.error
		// (events.py): later steps read the one it had before, if any. A
		// failed loop keeps its aggregate, as NoETL's loop.done does.
		keep := ev.Type != eventlog.TypeStepFailed || s.semantics < semanticsCallDone || s.Loops[p.Run] != nil
		if p.Result != nil && keep {
			s.Results[run.Step] = p.Result
			delete(s.views, run.Step)
			s.noteRefs(run.Step, p.Result)
		}
		s.mergeCtx(p.Ctx, p.Vars)
		s.finishing = remove(s.finishing, p.Run)
		for _, n := range p.Next {
			s.want(n.Step, n.Args)
		}
		s.retireRun(run)
	case eventlog.TypeLoopStarted:
		var p loopStartedPayload
		if err := decode(ev, &p); err != nil {
			return err
		}
		if s.Runs[p.Run] != nil || !s.isWanted(p.Run) {
			return nil // started already: a repeated decision
		}
		if p.MaxInFlight < 0 {
			return fmt.Errorf("engine: loop.started of %s: max_in_flight %d", p.Run, p.MaxInFlight)
		}
		s.startRun(p.Run, ev.Step, nil)
		s.consumeWanted(p.Joined)
		l := &loopState{Run: p.Run, Mode: p.Mode, Max: p.MaxInFlight, Items: p.Items, ItemsRef: p.ItemsRef, Count: p.Count,
			Chunk: p.ChunkSize, Shards: p.Shards, StartedAt: ev.Time}
		switch p.Mode {
		case dsl.ModeCursor:
			l.Slots = make([]slotState, p.MaxInFlight)
		case dsl.ModeFanout:
			l.Outputs = make([]any, p.Shards)
		default:
			l.Outputs = make([]any, l.count())
		}
		if p.Error != "" {
			l.Fail = p.Error
		}
		s.Loops[p.Run] = l
		s.checkLoop(l)
	case eventlog.TypeCommandIssued:
		var p issuedPayload
		if err := decode(ev, &p); err != nil {
			return err
		}
		c := s.Commands[p.Base]
		if (p.Reason == reasonLease || p.Reason == reasonUntaken || p.Reason == reasonResume) && (c == nil || c.Status == cmdCompleted || c.Status == cmdFailed) {
			// Re-issued for its lease, or on a resume, after its outcome
			// is on record (a finished command may be gone from the state
			// already): a late decision of another orchestrator, as when
			// two drove the execution. Revived, the command would stay in
			// flight for a step that is over, and the execution would
			// never end.
			return nil
		}
		if c == nil {
			c = &commandState{Base: p.Base, Run: p.Run, Kind: p.Kind}
			s.Commands[p.Base] = c
			switch p.Kind {
			case KindStep:
				run := s.startRun(p.Run, ev.Step, p.Args)
				run.Base = p.Base
				s.consumeWanted(p.Joined)
			case KindItem, KindShard:
				if l := s.Loops[p.Run]; l != nil {
					l.Next = max(l.Next, p.Index+max(1, p.Count))
				}
			case KindFrame:
				if l := s.Loops[p.Run]; l != nil && p.Slot < len(l.Slots) {
					l.Slots[p.Slot].Busy = true
					l.Slots[p.Slot].Recheck = false
					l.Slots[p.Slot].Frame++
					l.Frames++
				}
			}
		} else if c.Status == cmdIssued {
			// A re-issue of a command still in flight (lease expiry).
			s.inflight--
		}
		s.inflight++
		c.Attempt = ev.Attempt
		s.setStatus(c, cmdIssued)
		c.Issued = p
		c.IssuedAt = ev.Time
		c.Retry = nil
		c.Await = nil
		// Only attempts a worker took count (reasonUntaken does not).
		if p.Reason == reasonLease {
			c.Expiries++
		}
		if p.Kind == KindFrame && (p.Reason == reasonLease || p.HoldDrain) {
			s.holdDrain(s.Loops[p.Run], ev.Time)
		}
		if p.Reason == reasonShardRetry {
			c.ShardRetries++
		}
		if len(p.Rows) > 0 {
			c.rows, c.Buried = mustJSON(p.Rows), p.Buried
		}
	case eventlog.TypeFrameClaimed:
		var p frameClaimedRaw
		if err := decode(ev, &p); err != nil {
			return err
		}
		if c := s.current(ev); c != nil {
			c.rows, c.Buried = p.Rows, p.Buried
		}
	case eventlog.TypeCommandCompleted:
		c, p, err := reported[completedPayload](s, ev)
		if c == nil {
			return err
		}
		if p.Retry != nil && p.Retry.Paging {
			// A page of a paginating retry: the next one is decided like a
			// retry, and this one's contribution kept for the result.
			c.Pages = append(c.Pages, p.Retry.Page)
			c.Failure = p
			s.finishCommand(c, cmdRetryWanted)
			return nil
		}
		s.finishCommand(c, cmdCompleted)
		s.mergeCtx(p.Ctx, p.Vars)
		switch c.Kind {
		case KindStep:
			if run := s.Runs[c.Run]; run != nil {
				run.Output = p.Output
				run.Jump = p.Jump
				s.finishing = append(s.finishing, run.ID)
			}
		case KindItem, KindShard:
			if l := s.Loops[c.Run]; l != nil && c.Issued.Index < len(l.Outputs) {
				if c.Issued.Count > 0 {
					for k, o := range p.Outputs {
						if c.Issued.Index+k < len(l.Outputs) {
							l.Outputs[c.Issued.Index+k] = o
						}
					}
				} else {
					l.Outputs[c.Issued.Index] = p.Output
				}
				l.Done += max(1, c.Issued.Count)
				if c.Kind == KindShard {
					l.OK++
				}
				l.ProgressAt = ev.Time
				s.checkLoop(l)
			}
		}
	case eventlog.TypeCommandFailed:
		c, p, err := reported[completedPayload](s, ev)
		if c == nil {
			return err
		}
		c.Failure = p
		if p.Retry != nil {
			s.finishCommand(c, cmdRetryWanted)
			return nil
		}
		if c.Kind == KindShard {
			s.shardFailed(c, p, ev.Time)
			return nil
		}
		s.finishCommand(c, cmdFailed)
		if l := s.Loops[c.Run]; l != nil && c.Kind == KindItem {
			l.ProgressAt = ev.Time
		}
		s.failWork(c, p)
	case eventlog.TypeCommandAwaiting:
		c, p, err := reported[awaitingPayload](s, ev)
		if c == nil {
			return err
		}
		s.finishCommand(c, cmdAwaiting)
		c.Await = p
		if s.awaiters != nil {
			s.awaiters[p.ExecutionID] = append(s.awaiters[p.ExecutionID], c.Base)
		}
	case eventlog.TypeAwaitDone:
		var p awaitDonePayload
		if err := decode(ev, &p); err != nil {
			return err
		}
		if c := s.Commands[p.Base]; c != nil && c.parkedOn() == p.ExecutionID {
			s.setStatus(c, cmdAwaitDone)
		}
	case eventlog.TypeRetryScheduled:
		var p retryPayload
		if err := decode(ev, &p); err != nil {
			return err
		}
		if c := s.Commands[p.Base]; c != nil && c.Status == cmdRetryWanted {
			c.Retry = &p
			s.setStatus(c, cmdRetryWaiting)
		}
	case eventlog.TypeFrameDone:
		c, p, err := reported[frameDoneSummary](s, ev)
		if c == nil {
			return err
		}
		s.finishCommand(c, cmdCompleted)
		s.mergeCtx(p.Ctx, nil)
		l := s.Loops[c.Run]
		if l == nil {
			return nil
		}
		if c.Issued.Slot < 0 || c.Issued.Slot >= len(l.Slots) {
			return fmt.Errorf("engine: frame.done of %s: slot %d of a loop with %d slots", c.ID(), c.Issued.Slot, len(l.Slots))
		}
		slot := &l.Slots[c.Issued.Slot]
		slot.Busy = false
		if p.Exclusive && !l.Exclusive {
			// A claim that finds nothing there proves that no lost
			// attempt holds rows: a hold begun before this was known
			// ends.
			l.Exclusive, l.HoldUntil = true, time.Time{}
		}
		if p.Lost {
			s.holdDrain(l, ev.Time)
		}
		if p.Drained {
			if s.semantics >= semanticsClaimHold && c.IssuedAt.UnixMilli()+c.Issued.HoldMs < l.HoldUntil.UnixMilli() {
				// The claim may have come before a lost attempt's rows
				// went back to the source: look again after the hold.
				slot.Recheck = true
			} else {
				slot.Drained = true
			}
		}
		l.ProgressAt = ev.Time
		l.Rows += p.Counts.Rows
		l.OK += p.Counts.OK
		l.Failed += p.Counts.Failed
		l.Dead += p.Counts.Dead
		l.Abandoned += p.Abandoned
		l.Unreleased += p.Unreleased
		l.Returned += p.Returned
		if s.cancelRequested {
			l.Cancelled += p.Stopped
		}
		if p.Fail != "" && l.Fail == "" {
			l.Fail = p.Fail
		}
		if p.Released > 0 && p.Counts.Failed > 0 && l.Fail == "" {
			s.countHandedBack(l, ev, c)
		}
		s.checkLoop(l)
	case eventlog.TypeCancelRequested:
		s.cancelRequested = true
	case eventlog.TypeExecutionCompleted:
		if s.Status == StatusRunning {
			s.Status = StatusCompleted
			s.EndedAt = ev.Time
		}
	case eventlog.TypeExecutionCancelled:
		if s.Status == StatusRunning {
			s.Status = StatusCancelled
			s.EndedAt = ev.Time
		}
	case eventlog.TypeExecutionFailed:
		if s.Status == StatusRunning {
			s.Status = StatusFailed
			s.EndedAt = ev.Time
			_ = decode(ev, &s.Failure)
		}
	}
	return nil
}

// failInternal ends the execution failed after an internal error without
// running any more decision code, and returns the event to append.
func (s *State) failInternal(now time.Time, msg string) eventlog.Event {
	p := finishedPayload{Message: "internal error: " + msg}
	s.Status = StatusFailed
	s.Failure = p
	s.Events++
	return eventlog.Event{ExecutionID: s.ExecutionID, Type: eventlog.TypeExecutionFailed, Time: now, Payload: mustJSON(p)}
}

// isWanted reports whether run was routed to and not yet entered.
func (s *State) isWanted(run string) bool {
	for _, w := range s.wanted {
		if w.Run == run {
			return true
		}
	}
	return false
}

// retireRun drops a finished run from the state, keeping its step's last
// status and, for a loop, its counts.
func (s *State) retireRun(run *stepRun) {
	n := runNumber(run.ID)
	if last, ok := s.steps[run.Step]; !ok || n >= last.N {
		s.steps[run.Step] = finishedRun{N: n, Status: run.Status}
	}
	if l := s.Loops[run.ID]; l != nil {
		ls := s.loopStatus(run.ID, l)
		ls.Finished = true
		// Keep the counts of the step's latest loop only: a loop-back
		// playbook re-enters the step without bound.
		newest := true
		for id, old := range s.doneLoops {
			switch {
			case old.Step != run.Step:
			case runNumber(id) < n:
				delete(s.doneLoops, id)
			default:
				newest = false
			}
		}
		if newest {
			s.doneLoops[run.ID] = ls
		}
		delete(s.Loops, run.ID)
	}
	delete(s.Runs, run.ID)
}

// mergeCtx merges assignments into ctx and vars, noting references.
func (s *State) mergeCtx(ctx, vars map[string]any) {
	merge(s.Ctx, ctx)
	merge(s.Vars, vars)
	if len(ctx) > 0 && resultstore.HasRef(ctx) {
		s.noteRefs("ctx", ctx)
	}
	if len(vars) > 0 && resultstore.HasRef(vars) {
		s.noteRefs("vars", vars)
	}
}

// noteRefs records whether scope variable name holds references to
// stored results (ctx and vars, once they do, are kept marked).
func (s *State) noteRefs(name string, v any) {
	if resultstore.HasRef(v) {
		if s.refNames == nil {
			s.refNames = map[string]bool{}
		}
		s.refNames[name] = true
	} else if name != "ctx" && name != "vars" {
		delete(s.refNames, name)
	}
}

// takePending returns the stored values the decisions since the last call
// referred to; they must be written before those decisions are appended.
func (s *State) takePending() []*pendingBlob {
	p := s.pending
	s.pending = nil
	return p
}

// playbookHash returns the hex SHA-256 of the playbook source.
func (s *State) playbookHash() string {
	if s.hash == "" {
		sum := sha256.Sum256([]byte(s.started.Playbook))
		s.hash = hex.EncodeToString(sum[:])
	}
	return s.hash
}

// reported decodes a worker report and returns the command it reports on;
// a nil command means the report is stale (or its payload is bad: then
// err says why) and changes nothing.
func reported[P any](s *State, ev eventlog.Event) (*commandState, *P, error) {
	p := new(P)
	if err := decode(ev, p); err != nil {
		return nil, nil, err
	}
	return s.current(ev), p, nil
}

// current returns the command an event reports on, or nil when the event
// carries a stale fencing token (an earlier attempt) or the command is no
// longer in flight.
func (s *State) current(ev eventlog.Event) *commandState {
	base, attempt, ok := splitCommandID(ev.CommandID)
	if !ok {
		return nil
	}
	c := s.Commands[base]
	if c == nil || c.Attempt != attempt || c.Status != cmdIssued {
		return nil
	}
	return c
}

// leaseFor returns the lease and heartbeat interval of a command: its
// loop's frame.lease_seconds and heartbeat_seconds for a frame, def and
// def/dsl.HeartbeatsPerLease otherwise.
func (s *State) leaseFor(commandID string, def time.Duration) (lease, beat time.Duration) {
	lease, beat = def, def/dsl.HeartbeatsPerLease
	base, _, ok := splitCommandID(commandID)
	if !ok || s.Playbook == nil {
		return lease, beat
	}
	c := s.Commands[base]
	if c == nil || c.Kind != KindFrame {
		return lease, beat
	}
	if st := s.loopStep(c.Run); st != nil {
		if f := s.frameOf(st); f.LeaseSeconds > 0 {
			lease = time.Duration(f.LeaseSeconds * float64(time.Second))
			beat = lease / dsl.HeartbeatsPerLease
			if f.HeartbeatSeconds > 0 {
				beat = time.Duration(f.HeartbeatSeconds * float64(time.Second))
			}
		}
	}
	return lease, beat
}

// loopStep returns the looping step that run runID is of, nil when there
// is none.
func (s *State) loopStep(runID string) *dsl.Step {
	if r := s.Runs[runID]; r != nil && s.Playbook != nil {
		if st := s.Playbook.Step(r.Step); st != nil && st.Loop != nil {
			return st
		}
	}
	return nil
}

// frameOf returns a cursor step's frame spec with its templates rendered
// against the execution's scope; a template that does not render leaves
// the defaults (the worker reports the error when it runs the frame).
func (s *State) frameOf(st *dsl.Step) dsl.FrameSpec {
	fs := st.Loop.Frame
	if len(fs.Templates) == 0 {
		return fs
	}
	if r, err := fs.Resolve(s.scope()); err == nil {
		return r
	}
	return fs
}

// claimHoldMargin is added to a frame lease in holdDrain: the source
// counts the lease on its own timer (PostgreSQL's
// idle_in_transaction_session_timeout, a stream's idle time), which may
// fire a little late.
const claimHoldMargin = time.Second

// holdDrain records that a frame attempt of loop l was lost at time at
// (its lease ran out, or it was given up): until a frame lease later,
// when the source has taken back what the attempt may have claimed
// without recording it, no claim that finds nothing drains its slot
// (semanticsClaimHold). A worker that died frees its transactional
// claim at once, but one that stalled with its connection open (a
// paused process, a frozen VM) holds it until the source ends it; the
// other claims skip its locked rows meanwhile.
func (s *State) holdDrain(l *loopState, at time.Time) {
	if l == nil || l.Exclusive || s.semantics < semanticsClaimHold {
		return
	}
	lease := time.Duration(dsl.DefaultFrameLeaseSeconds * float64(time.Second))
	if st := s.loopStep(l.Run); st != nil {
		if fs := s.frameOf(st); fs.LeaseSeconds > 0 {
			lease = time.Duration(fs.LeaseSeconds * float64(time.Second))
		}
	}
	if until := at.Add(lease + claimHoldMargin); until.After(l.HoldUntil) {
		l.HoldUntil = until
	}
}

// countHandedBack counts the failed rows of a frame.done whose frame handed
// rows back to the source, and stops the loop (l.Fail) once a row has
// failed more often than the loop's max_attempts. A source that counts its
// deliveries sets such a row aside by then (a SQL cursor whose claim
// returns attempts dead-letters it when it claims attempt max_attempts+1);
// one that does not would hand the row out again forever, each time as a
// first attempt.
//
// Where the source numbers the deliveries (frame c's recorded rows carry
// attempts past the first), a row's failures count once per delivery
// number (semanticsDeliveries): a claim whose commit was lost after its
// record ran its rows, and the source, its mark rolled back, hands them
// out again under the same number; and from semanticsDeliverySet once per
// distinct number, so that such a delivery's failure reported late, after
// later ones, counts no more. Twice max_attempts failures stop the loop
// all the same, whatever the numbers say.
func (s *State) countHandedBack(l *loopState, ev eventlog.Event, c *commandState) {
	var p frameDonePayload
	if decode(ev, &p) != nil {
		return
	}
	limit := dsl.DefaultFrameMaxAttempts
	if st := s.loopStep(l.Run); st != nil {
		if fs := s.frameOf(st); fs.MaxAttempts > 0 {
			limit = fs.MaxAttempts
		}
	}
	var attempt map[string]int
	if s.semantics >= semanticsDeliveries {
		rows := c.frameRows()
		attempt = make(map[string]int, len(rows))
		for _, r := range rows {
			attempt[r.Key] = r.Attempt
		}
	}
	for _, it := range p.Items {
		if it.Outcome != OutcomeError {
			continue
		}
		if l.HandedBack == nil {
			l.HandedBack = map[string]int{}
		}
		l.HandedBack[it.Key]++
		n := l.HandedBack[it.Key]
		counted := n
		if attempt != nil {
			if l.Deliveries == nil {
				l.Deliveries = map[string]*deliveries{}
			}
			d := l.Deliveries[it.Key]
			if d == nil {
				d = &deliveries{}
				l.Deliveries[it.Key] = d
			}
			d.failed(attempt[it.Key], s.semantics >= semanticsDeliverySet)
			if d.Numbered && n <= 2*limit {
				counted = d.Distinct
			}
		}
		if counted > limit && l.Fail == "" {
			l.Fail = fmt.Sprintf("row %s failed %d times, more than max_attempts (%d), and went back to the source each time "+
				"without being set aside (a SQL cursor sets such rows aside when its claim returns an attempts column and it has a "+
				"dead_letter statement); the loop stops rather than run it forever. Last error: %s", it.Key, n, limit, it.Error)
		}
	}
}

// deliveries is what the fold knows of the deliveries of one row whose
// failures went back to the source (semanticsDeliveries).
type deliveries struct {
	// Distinct counts the failures under a delivery number other than the
	// previous failure's (from semanticsDeliverySet: other than any
	// earlier failure's); Last is the latest failure's number.
	Distinct, Last int
	// Numbered is set once the source numbered a delivery past the first:
	// it counts them, and Distinct is the count that matters.
	Numbered bool
	// Numbers are the delivery numbers the row failed under
	// (semanticsDeliverySet).
	Numbers []int `json:",omitempty"`
}

// failed notes a failure of the row's delivery number attempt (0: not
// recorded); asSet counts each number once (semanticsDeliverySet).
func (d *deliveries) failed(attempt int, asSet bool) {
	switch {
	case asSet:
		if !slices.Contains(d.Numbers, attempt) {
			d.Numbers = append(d.Numbers, attempt)
			d.Distinct++
		}
		d.Last = attempt
	case attempt != d.Last || d.Distinct == 0:
		d.Distinct++
		d.Last = attempt
	}
	if attempt > 1 {
		d.Numbered = true
	}
}

// Accepts reports whether a worker's report for commandID would be applied:
// the fencing check the orchestrator runs before appending.
func (s *State) Accepts(ev eventlog.Event) bool { return s.current(ev) != nil }

func (s *State) finishCommand(c *commandState, status string) {
	if c.Status == cmdIssued {
		s.inflight--
	}
	s.setStatus(c, status)
	if status == cmdCompleted || status == cmdFailed {
		// A finished command is dropped: a late report for it fails the
		// fencing check all the same, and a long cursor loop's state stays
		// as small as its in-flight frames.
		delete(s.Commands, c.Base)
	}
}

// resumableStatus reports whether a command in status has something
// for the decider to do: a retry to schedule or issue, a shard or a
// parked call to issue again.
func resumableStatus(status string) bool {
	switch status {
	case cmdRetryWanted, cmdRetryWaiting, cmdShardRetry, cmdAwaitDone:
		return true
	}
	return false
}

// setStatus sets c's status, the one way it changes, and keeps
// resumable.
func (s *State) setStatus(c *commandState, status string) {
	c.Status = status
	if s.resumable == nil {
		return // built from Commands when first needed
	}
	if resumableStatus(status) {
		s.resumable[c.Base] = struct{}{}
	} else {
		delete(s.resumable, c.Base)
	}
}

// resumableBases returns the bases of the commands in a resumable
// status, unordered.
func (s *State) resumableBases() map[string]struct{} {
	if s.resumable == nil {
		s.resumable = map[string]struct{}{}
		for base, c := range s.Commands {
			if resumableStatus(c.Status) {
				s.resumable[base] = struct{}{}
			}
		}
	}
	return s.resumable
}

func (s *State) failWork(c *commandState, p *completedPayload) {
	switch c.Kind {
	case KindStep:
		if run := s.Runs[c.Run]; run != nil {
			run.Failed = p
			run.Output = p.Output
			s.finishing = append(s.finishing, run.ID)
		}
	case KindItem, KindFrame:
		if l := s.Loops[c.Run]; l != nil {
			if l.Fail == "" {
				l.Fail = p.Error
				if l.Fail == "" {
					l.Fail = "failed"
				}
				// Say which item: a loop of many fails for one of them.
				switch {
				case c.Kind != KindItem:
				case c.Issued.Count > 1:
					l.Fail = fmt.Sprintf("items %d-%d: %s", c.Issued.Index, c.Issued.Index+c.Issued.Count-1, l.Fail)
				default:
					l.Fail = fmt.Sprintf("item %d: %s", c.Issued.Index, l.Fail)
				}
			}
			if c.Kind == KindItem && c.Issued.Index < len(l.Outputs) {
				l.Outputs[c.Issued.Index] = p.Output
				l.Done += max(1, c.Issued.Count)
				l.Failed += max(1, c.Issued.Count)
				if s.cancelRequested && p.Error == cancelledError {
					l.Cancelled += max(1, c.Issued.Count)
				}
			}
			if c.Kind == KindFrame && c.Issued.Slot < len(l.Slots) {
				l.Slots[c.Issued.Slot].Busy = false
			}
			s.checkLoop(l)
		}
	}
}

// checkLoop queues the loop's run for completion once no work is left.
func (s *State) checkLoop(l *loopState) {
	if contains(s.finishing, l.Run) {
		return
	}
	if run := s.Runs[l.Run]; run == nil || run.Status != runRunning {
		return
	}
	if s.loopInFlight(l) > 0 {
		return
	}
	if l.Fail != "" {
		s.finishing = append(s.finishing, l.Run)
		return
	}
	switch l.Mode {
	case dsl.ModeCursor:
		for _, sl := range l.Slots {
			if !sl.Drained {
				return
			}
		}
	case dsl.ModeFanout:
		if l.Done < l.Shards {
			return
		}
	default:
		if l.Done < l.count() {
			return
		}
	}
	s.finishing = append(s.finishing, l.Run)
}

func (s *State) loopInFlight(l *loopState) int {
	if l.Mode == dsl.ModeCursor {
		n := 0
		for _, sl := range l.Slots {
			if sl.Busy {
				n++
			}
		}
		return n
	}
	return l.Next - l.Done
}

func (s *State) startRun(id, step string, args map[string]any) *stepRun {
	run := s.Runs[id]
	if run == nil {
		run = &stepRun{ID: id, Step: step, Status: runRunning, Args: args}
		s.Runs[id] = run
	}
	for i, w := range s.wanted {
		if w.Run == id {
			if run.Args == nil {
				run.Args = w.Args
			}
			s.wanted = append(s.wanted[:i:i], s.wanted[i+1:]...)
			break
		}
	}
	return run
}

func (s *State) want(step string, args map[string]any) {
	s.runCount[step]++
	s.wanted = append(s.wanted, wantedStep{Run: fmt.Sprintf("%s#%d", step, s.runCount[step]), Step: step, Args: args})
}

// Idle reports whether nothing is in flight, wanted or awaiting a decision.
func (s *State) idle() bool {
	if s.inflight > 0 || len(s.wanted) > 0 || len(s.finishing) > 0 {
		return false
	}
	for _, c := range s.Commands {
		switch c.Status {
		case cmdRetryWanted, cmdRetryWaiting, cmdAwaiting, cmdAwaitDone, cmdShardRetry:
			return false
		}
	}
	for _, l := range s.Loops {
		if run := s.Runs[l.Run]; run != nil && run.Status == runRunning {
			return false
		}
	}
	return true
}

// parkedOn returns the execution c is parked on, or "" when it is not
// parked.
func (c *commandState) parkedOn() string {
	if c.Status != cmdAwaiting || c.Await == nil {
		return ""
	}
	return c.Await.ExecutionID
}

// Awaiting returns, by command id, the executions that parked commands
// wait for.
func (s *State) Awaiting() map[string]string {
	out := map[string]string{}
	for _, c := range s.Commands {
		if on := c.parkedOn(); on != "" {
			out[c.ID()] = on
		}
	}
	return out
}

// awaitedBy returns the execution the command attempt id is parked on,
// or "" when it is not parked.
func (s *State) awaitedBy(id string) string {
	base, _, ok := splitCommandID(id)
	if !ok {
		return ""
	}
	if c := s.Commands[base]; c != nil {
		return c.parkedOn()
	}
	return ""
}

// awaitDone returns the event that resumes the command parked on
// executionID, if one is, applied to the state.
func (s *State) awaitDone(executionID, status string, now time.Time) (eventlog.Event, bool) {
	if s.awaiters == nil {
		s.awaiters = map[string][]string{}
		for b, c := range s.Commands {
			if on := c.parkedOn(); on != "" {
				s.awaiters[on] = append(s.awaiters[on], b)
			}
		}
	}
	// The first command still parked on executionID in id order; those
	// no longer parked on it are dropped from the list, and the one
	// resumed once the event is applied.
	base := ""
	parked := s.awaiters[executionID][:0]
	for _, b := range s.awaiters[executionID] {
		if c := s.Commands[b]; c == nil || c.parkedOn() != executionID || slices.Contains(parked, b) {
			continue
		}
		parked = append(parked, b)
		if base == "" || b < base {
			base = b
		}
	}
	s.setAwaiters(executionID, parked)
	if base == "" {
		return eventlog.Event{}, false
	}
	c := s.Commands[base]
	ev := eventlog.Event{ExecutionID: s.ExecutionID, Type: eventlog.TypeAwaitDone, Step: s.stepOf(c), CommandID: c.ID(),
		Attempt: c.Attempt, Time: now, Payload: mustJSON(awaitDonePayload{Base: base, ExecutionID: executionID, Status: status})}
	if c.Kind != KindStep {
		ev.LoopID = c.Run
	}
	if err := s.Apply(ev); err != nil {
		return eventlog.Event{}, false
	}
	s.setAwaiters(executionID, slices.DeleteFunc(parked, func(b string) bool { return b == base }))
	return ev, true
}

// setAwaiters lists bases as the commands parked on executionID.
func (s *State) setAwaiters(executionID string, bases []string) {
	if len(bases) == 0 {
		delete(s.awaiters, executionID)
	} else {
		s.awaiters[executionID] = bases
	}
}

// stepOfCommand returns the step of the command attempt id ("" if
// unknown).
func (s *State) stepOfCommand(id string) string {
	base, _, ok := splitCommandID(id)
	if !ok || s.Commands[base] == nil {
		return ""
	}
	return s.stepOf(s.Commands[base])
}

// poolOfCommand returns the worker pool the command attempt id goes to
// ("" for any worker).
func (s *State) poolOfCommand(id string) string {
	if s.Playbook == nil {
		return ""
	}
	if st := s.Playbook.Step(s.stepOfCommand(id)); st != nil {
		return st.Spec.Pool
	}
	return ""
}

func (s *State) stepOf(c *commandState) string {
	if r := s.Runs[c.Run]; r != nil {
		return r.Step
	}
	return ""
}

// InFlight returns the ids of commands issued and not yet finished, sorted.
func (s *State) InFlight() []string {
	var ids []string
	for _, c := range s.Commands {
		if c.Status == cmdIssued {
			ids = append(ids, c.ID())
		}
	}
	sort.Strings(ids)
	return ids
}

func decode(ev eventlog.Event, v any) error {
	if len(ev.Payload) == 0 {
		return nil
	}
	if md, ok := v.(memberDecoder); ok {
		if jsonnum.Members(ev.Payload, md.decodeMember) == nil {
			return nil
		}
		// Read it the ordinary way, which also words the error.
		reflect.ValueOf(v).Elem().SetZero()
	}
	if err := unmarshal(ev.Payload, v); err != nil {
		return fmt.Errorf("engine: event %d (%s) of %s: bad payload: %w", ev.Seq, ev.Type, ev.ExecutionID, err)
	}
	return nil
}

// memberDecoder is a payload that reads itself member by member from the
// log's (valid) JSON, skipping unparsed the members it does not need: a
// frame's recorded rows and row outcomes are most of its events' bytes,
// and the fold needs neither.
type memberDecoder interface {
	decodeMember(key string, raw []byte) error
}

// unmarshal decodes JSON keeping integers integers (see jsonnum), so a
// value read back from the log renders exactly as it did before it was
// written ("1", not "1.0").
func unmarshal(b []byte, v any) error { return jsonnum.Unmarshal(b, v) }

func merge(dst, src map[string]any) {
	for k, v := range src {
		dst[k] = v
	}
}

func remove(list []string, v string) []string {
	for i, x := range list {
		if x == v {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
