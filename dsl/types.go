package dsl

import (
	"fmt"
	"time"
)

// Pos is a position in a playbook source file. Line and Col are 1-based;
// the zero Pos means "unknown".
type Pos struct {
	File string
	Line int
	Col  int
}

// String formats the position as file:line:col.
func (p Pos) String() string {
	if p.File == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Playbook is a parsed NoETL v2 playbook.
type Playbook struct {
	File       string
	APIVersion string
	Kind       string
	Metadata   Metadata
	// Workload holds the workload block as plain Go values (maps, slices,
	// scalars). Templates inside it are rendered by the engine when an
	// execution starts.
	Workload map[string]any
	// Vars are playbook-level variables, rendered when an execution starts.
	Vars     map[string]*Value
	Keychain []*KeychainEntry
	Workbook []*Task
	Workflow []*Step
	// Warnings lists non-fatal findings such as unknown keys.
	Warnings []Diagnostic
	Pos      Pos

	steps map[string]*Step
}

// Step returns the workflow step with the given name, or nil.
func (p *Playbook) Step(name string) *Step { return p.steps[name] }

// WorkbookTask returns the workbook task with the given name, or nil.
func (p *Playbook) WorkbookTask(name string) *Task {
	for _, t := range p.Workbook {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Metadata is the playbook's metadata block.
type Metadata struct {
	Name        string
	Path        string
	Description string
	// Extra holds every other metadata key as plain values.
	Extra map[string]any
}

// KeychainEntry declares a credential alias the playbook uses.
type KeychainEntry struct {
	Name string
	Kind string
	// Fields holds the entry's other keys as plain values.
	Fields map[string]any
	Pos    Pos
}

// Step is one workflow step.
type Step struct {
	Name string
	Desc string
	// When is the step's enable guard; a false guard records step.skipped.
	When *Template
	// Args holds the step's args (or its NoETL alias input), rendered before
	// the tool chain runs and handed to each tool.
	Args map[string]*Value
	// Vars are rendered before the tool chain and exposed as vars.<name>.
	Vars map[string]*Value
	// Set assignments run after the step, rendered against output.
	Set []*Assignment
	// Loop, when non-nil, makes the step iterate.
	Loop *Loop
	// Tool is the step's tool chain: one task for a single-tool step, the
	// pipeline's tasks in order otherwise. Empty only for kind: workbook
	// steps, whose task comes from the workbook.
	Tool []*Task
	// Pipeline reports whether Tool was written as a list.
	Pipeline bool
	// Kind is "workbook" for a step that runs a workbook task named by
	// TaskName; empty otherwise.
	Kind     string
	TaskName string
	Next     *Next
	Spec     StepSpec
	// Extra holds unknown keys; they are reported in Playbook.Warnings.
	Extra map[string]*Value
	Pos   Pos
}

// StepSpec is a step's spec block.
type StepSpec struct {
	// Timeout bounds one run of the step's tool chain; zero means none.
	Timeout time.Duration
	// OnError is NoETL's on_error hint ("fail", "continue", ...); empty
	// means fail.
	OnError string
	// Policy applies to a single-tool step when its task has no policy of
	// its own.
	Policy *Policy
	// Pool names the worker pool that runs the step's commands when the
	// engine scales out (engine/natsjs); empty means the default pool.
	Pool string
	// LoopMode is NoETL's step-level spec.loop_mode: fanout makes the
	// step's loop a fan-out loop (as loop.spec.loop_mode does).
	LoopMode string
	// WorkerLabels ask for a worker whose labels include them all
	// (engine/natsjs sends the step's commands to such a worker of the
	// pool while one is alive, to the pool otherwise).
	WorkerLabels map[string]string
	// Extra holds unknown spec keys as plain values.
	Extra map[string]any
}

// Task is one tool invocation: a single-tool step's tool, one entry of a
// pipeline, or a workbook task.
type Task struct {
	// Name labels a pipeline task; for a single tool it is empty.
	Name string
	// Kind selects the tool (http, postgres, python, ...). Parsing does not
	// depend on a kind being registered.
	Kind string
	// Config holds every key except name, kind, spec and set: the tool's
	// own configuration (url, command, auth, code, ...), with compiled
	// templates inside.
	Config map[string]*Value
	// Policy is the task's spec.policy, or nil.
	Policy *Policy
	// Timeout is the task's spec.timeout; zero means none.
	Timeout time.Duration
	// Set assignments run after the task, rendered against output.
	Set []*Assignment
	Pos Pos
}

// Loop makes a step iterate over a collection (In) or drain a cursor.
type Loop struct {
	// In renders to the list to iterate over; nil for cursor loops.
	In *Value
	// Cursor is the cursor source; nil for collection loops.
	Cursor   *CursorSpec
	Iterator string
	// Mode is sequential, parallel or cursor. Defaults to sequential for
	// collection loops and cursor for cursor loops.
	Mode string
	// MaxInFlight bounds concurrent items (parallel) or frame slots
	// (cursor). Zero means the default: 1 for sequential, unbounded up to
	// the collection size for parallel, 1 for cursor.
	MaxInFlight int
	Frame       FrameSpec
	// Fanout configures mode fanout (loop.spec.loop_mode: fanout): the
	// collection is split into shards, each a durable command whose
	// iterator is the shard's list of items.
	Fanout FanoutSpec
	// Policy holds loop-level policy rules, if any.
	Policy *Policy
	Pos    Pos
}

// FanoutSpec splits a fan-out loop's collection into shards.
type FanoutSpec struct {
	// Shards is the number of shards (at most one per item); ShardSize
	// the items per shard instead. Neither set: one shard per item.
	Shards    int
	ShardSize int
	// MaxShardRetries is how many times a failed shard is issued again
	// before it counts as failed. Defaults to 0.
	MaxShardRetries int
	// AllowPartial lets the step complete, and route, when some shards
	// failed; otherwise a failed shard fails the step.
	AllowPartial bool
}

// Loop modes.
const (
	ModeSequential = "sequential"
	ModeParallel   = "parallel"
	ModeCursor     = "cursor"
	// ModeFanout splits the collection into shard commands with a
	// fan-in in the event log (loop.spec.loop_mode: fanout).
	ModeFanout = "fanout"
)

// Frame process modes.
const (
	ProcessRow   = "row"
	ProcessFrame = "frame"
)

// CursorSpec is a cursor loop's source.
type CursorSpec struct {
	Kind string
	// Auth names the credential alias (auth or credential key).
	Auth *Value
	// Claim is the claim statement for SQL drivers; nil for others.
	Claim *Template
	// Options holds every other key of the cursor block.
	Options map[string]*Value
	Pos     Pos
}

// FrameSpec bounds one frame of a cursor loop.
type FrameSpec struct {
	// MaxRows is the most rows one claim takes. Defaults to 1.
	MaxRows int
	// RowConcurrency bounds rows run at once in process: row. Defaults to 1.
	RowConcurrency int
	// LeaseSeconds is how long a frame may run without a heartbeat before
	// the reaper re-issues it. Defaults to 60.
	LeaseSeconds float64
	// HeartbeatSeconds is the heartbeat interval. Defaults to LeaseSeconds/3.
	HeartbeatSeconds float64
	// MaxSeconds bounds a frame's run time; rows not started by then are
	// released. Zero means no bound.
	MaxSeconds float64
	// MaxBytes bounds the claimed rows' encoded size; zero means no bound.
	MaxBytes int64
	// Process is row (default) or frame.
	Process string
	// MaxAttempts is how many times a frame may be issued before its rows
	// are dead-lettered. Defaults to 3.
	MaxAttempts int
}

// Next routes a finished step to its successors.
type Next struct {
	// Mode is exclusive (first matching arc, the default) or inclusive
	// (every matching arc).
	Mode string
	// OnNoMatch is NoETL's on_no_match hint; kept, not enforced.
	OnNoMatch string
	Arcs      []*Arc
	Pos       Pos
}

// Routing modes.
const (
	NextExclusive = "exclusive"
	NextInclusive = "inclusive"
)

// Arc is one edge of the workflow graph.
type Arc struct {
	Step string
	// When guards the arc; nil means always.
	When *Template
	Set  []*Assignment
	Args map[string]*Value
	Pos  Pos
}

// Policy is an ordered list of rules; the first that matches decides.
type Policy struct {
	Rules []*Rule
	Pos   Pos
}

// Rule is one policy rule. An else rule has Else set and When nil.
type Rule struct {
	When *Template
	Else bool
	Then Action
	Pos  Pos
}

// Policy actions.
const (
	DoContinue = "continue"
	DoRetry    = "retry"
	DoBreak    = "break"
	DoJump     = "jump"
	DoFail     = "fail"
)

// Backoff kinds.
const (
	BackoffNone        = "none"
	BackoffFixed       = "fixed"
	BackoffLinear      = "linear"
	BackoffExponential = "exponential"
)

// Action is what a matching rule does.
type Action struct {
	Do string
	// Attempts bounds retries (total attempts including the first).
	// Defaults to 3 for retry.
	Attempts int
	// Backoff defaults to fixed when Delay is set, none otherwise.
	Backoff string
	// Delay is the base retry delay.
	Delay time.Duration
	// To is the jump target (a pipeline task name or a step name).
	To  string
	Set []*Assignment
	Pos Pos
}

// Assignment is one `path: value` entry of a set block, such as
// ctx.total: '{{ output.data.row_count }}'.
type Assignment struct {
	// Path is the dotted target, e.g. "ctx.total" or "iter.page".
	Path  string
	Value *Value
	Pos   Pos
}
