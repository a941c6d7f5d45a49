package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
)

// Command is one unit of work handed to a worker: run a step's tool chain,
// run it for one loop item, or claim and run one frame of a cursor loop.
//
// A Command encodes to JSON for transports that cross processes; the
// parsed Playbook does not travel: a remote worker looks the source up by
// PlaybookHash (the transport ships PlaybookSource once per hash) and
// parses it itself.
type Command struct {
	ExecutionID string `json:"execution_id"`
	// ID is "base@attempt", the command's fencing token: a report that
	// carries an ID other than the current attempt's is refused.
	ID      string `json:"id"`
	Base    string `json:"base"`
	Attempt int    `json:"attempt"`
	Kind    string `json:"kind"`
	Step    string `json:"step"`
	Run     string `json:"run"`
	// Playbook is the execution's parsed playbook.
	Playbook *dsl.Playbook `json:"-"`
	// PlaybookHash is the hex SHA-256 of PlaybookSource.
	PlaybookHash string `json:"playbook_hash"`
	// PlaybookFile names the source in positions.
	PlaybookFile string `json:"playbook_file,omitempty"`
	// PlaybookSource is the playbook's text (not encoded).
	PlaybookSource string `json:"-"`
	// Scope is the render context (workload, results, ctx, vars, ...),
	// without iter; read-only.
	Scope map[string]any `json:"scope"`
	// Args are the arguments an arc passed to the step.
	Args map[string]any `json:"args,omitempty"`
	// Item and Index are a collection loop item and its position. A
	// chunked loop's command runs Count items, Items, from Index. When the
	// collection was stored, ItemsRef refers to it instead of Item and
	// Items, and the worker reads its items from it. Length is the
	// collection's length (NoETL's loop.length).
	Item     any            `json:"item,omitempty"`
	Index    int            `json:"index,omitempty"`
	Count    int            `json:"count,omitempty"`
	Items    []any          `json:"items,omitempty"`
	ItemsRef map[string]any `json:"items_ref,omitempty"`
	Length   int            `json:"length,omitempty"`
	// LoopVars gives an item's or a row's scope NoETL's loop variable
	// (loop.index, loop.first, ...), which takes the name loop from a
	// workload key, ctx key or step result of that name: set for an
	// execution recorded at semanticsCallDone or later only, so that a
	// history recorded before renders its loop bodies as it did.
	LoopVars bool `json:"loop_vars,omitempty"`
	// StepVars names the steps whose results the worker lays into ctx and
	// workload (semanticsStepView: NoETL's variables hold every finished
	// step's result), sorted. The scope carries each result once, under
	// its step's name, rather than three times (name, ctx, workload) in
	// every command a transport ships. A worker from before it ignores
	// it, and renders ctx.STEP empty.
	StepVars []string `json:"step_vars,omitempty"`
	// From and To are a fan-out shard's items [From, To) of the
	// collection (Item holds them, or ItemsRef refers to the whole); Index
	// is the shard's number of Shards.
	From   int `json:"from,omitempty"`
	To     int `json:"to,omitempty"`
	Shards int `json:"shards,omitempty"`
	// Slot and Frame number a cursor frame; Rows are set when the frame is
	// re-issued with the rows its first attempt claimed.
	Slot  int        `json:"slot,omitempty"`
	Frame int        `json:"frame,omitempty"`
	Rows  []FrameRow `json:"rows,omitempty"`
	// LoopKey names a frame's loop run to its cursor driver
	// (cursor.Spec.LoopID): "<execution id>/<run id>", the run's own in
	// every execution, so a default consumer group or durable is never
	// another execution's. Empty (an execution recorded before, whose
	// frames keep what they had): the run id, which repeats in every
	// execution of a playbook.
	LoopKey string `json:"loop_key,omitempty"`
	// Buried, on a re-issued frame, are the keys of the rows its first
	// attempt's claim set aside (cursor.Claim.Dead): the frame reports
	// them dead.
	Buried []string `json:"buried,omitempty"`
	// StartTask, TaskAttempt and Carry resume a pipeline after a retry.
	StartTask   int            `json:"start_task,omitempty"`
	TaskAttempt int            `json:"task_attempt,omitempty"`
	Carry       map[string]any `json:"carry,omitempty"`
	// NextCall and Pages continue a paginating retry: the overrides of the
	// next call, and what the earlier pages contributed, in order (from
	// the log's fold, not recorded again per page).
	NextCall map[string]any `json:"next_call,omitempty"`
	Pages    []any          `json:"pages,omitempty"`
	// Lease is how long the command may go without a heartbeat before its
	// first one (the orchestrator re-issues it then); it also bounds every
	// later silence.
	Lease time.Duration `json:"lease"`
	// Heartbeat is how often the worker running the command heartbeats (a
	// frame's heartbeat_seconds, else Lease/dsl.HeartbeatsPerLease). Once
	// a command has heartbeated, the orchestrator re-issues it after
	// Config.MissedHeartbeats intervals of silence.
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
	// Settle, on a re-issued frame, says that the frame is not to run its
	// body but to settle its recorded rows with the source: SettleDeadLetter
	// (the engine gave up on them) or SettleRelease (the execution is being
	// cancelled). SettleReason is the dead letter's reason.
	Settle       string `json:"settle,omitempty"`
	SettleReason string `json:"settle_reason,omitempty"`
	// Lost, on a re-issued frame without recorded rows, says that an
	// earlier attempt was taken and lost (its worker or process died): it
	// may have claimed rows it never recorded, which a source with leases
	// of its own holds until they run out. Such a frame waits a lease
	// before it claims, so that it takes them back (a source reclaims
	// overdue rows first) instead of the drain ending without them.
	Lost bool `json:"lost,omitempty"`
	// Hold, on a frame, is how long to wait before claiming: its slot's
	// last claim found no rows while an earlier lost attempt of the loop
	// may still have held some it never recorded, which the source takes
	// back a frame lease after the loss. The engine takes the frame's
	// empty claim as coming after the hold (its issue time and Hold), so
	// a worker that does not know Hold (an older remote worker) claims at
	// once and its empty claim drains the slot as before semantics 6.
	// A cancel of the execution ends the wait.
	Hold time.Duration `json:"hold,omitempty"`
	// Pool names the worker pool that should run the command (empty: any),
	// from the step's spec.pool.
	Pool string `json:"pool,omitempty"`
	// Labels, from the step's spec.worker_labels, ask for a worker whose
	// labels include them all; a transport that knows its workers
	// (engine/natsjs) sends the command to such a worker of the pool, and
	// to the pool as a whole when none is alive.
	Labels map[string]string `json:"labels,omitempty"`
	// Meta carries trace context and other transport metadata.
	Meta map[string]string `json:"meta,omitempty"`
}

// Reporter carries a worker's reports back to the orchestrator.
type Reporter interface {
	// Report delivers a worker event (command.completed, command.failed,
	// frame.claimed, frame.done). It returns once the event is durably
	// recorded, or with the reason it was refused (ErrStale for a report
	// whose fencing token is no longer current).
	Report(ctx context.Context, ev eventlog.Event) error
	// Heartbeat extends the lease of a running command.
	Heartbeat(ctx context.Context, executionID, commandID string) error
}

// Voucher is a Reporter that can say at once whether an attempt is still
// the one its command runs under. The engine's own (Engine.Reporter) is
// one. A transport asks before it runs a command message it may hold a
// stale copy of (delivered again, or left waiting in a queue): the answer
// that vouches for an attempt renews its lease as a heartbeat does, in
// the same step, so the engine cannot re-issue the command between the
// answer and the worker's first heartbeat and have it run twice; an
// attempt the engine re-issued, settled or does not drive is refused with
// ErrStale.
type Voucher interface {
	Vouch(ctx context.Context, executionID, commandID string) error
}

// ChainReporter is a Reporter that records a frame's outcome and the
// claim of its slot's next frame in one step, so a cursor slot pays one
// event-log append per frame instead of two (frame.done, then the next
// frame's frame.claimed).
//
// A worker that has run a frame claims the slot's next rows ahead, holds
// the claim uncommitted and calls ReportChained with the frame.done event
// and the frame.claimed payload of those rows. The orchestrator folds the
// frame.done and decides as for Report; if it issues the slot's next frame,
// it records the rows under that command in the same append and returns
// the command: the worker commits its claim and runs the frame under it,
// as if it had been dispatched and claimed. With a nil command and a nil
// error the frame.done is recorded and no next frame is issued for the
// slot (the loop is stopping, the execution cancelled, ...): the worker
// gives the rows back. A report the orchestrator could not record
// (ErrUnavailable) is sent again by the reporter, the claim held
// meanwhile: the append that failed may have stored it after all, and
// then the report sent again gets the recorded next frame. On an error
// ReportChained returns, the worker gives the rows back and reports the
// frame.done alone.
//
// Workers use it only with sources whose abort is a rollback
// (cursor.Features.TransactionalClaim), where rows claimed ahead and given
// back leave no trace, and only while MayChain is true: a chained report
// must be recorded after every report its command made before it (a
// frame's partial results), and a transport that carries it another way
// than those (natsjs: a request beside the events stream) says no once
// the command made any.
type ChainReporter interface {
	Reporter
	// MayChain reports whether a chained report of the command this
	// reporter serves would be recorded after the reports it made so far.
	MayChain() bool
	ReportChained(ctx context.Context, done eventlog.Event, claimed json.RawMessage) (*Command, error)
}

// loopKey is the loop run's name for its cursor driver: LoopKey, else
// (an execution recorded before semanticsLoopKey) Run.
func (c *Command) loopKey() string {
	if c.LoopKey != "" {
		return c.LoopKey
	}
	return c.Run
}
