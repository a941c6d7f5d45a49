package dsl

import (
	"cmp"
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

// Compare orders positions by line, then column (the file is not
// compared): -1, 0 or +1, for slices.SortStableFunc over diagnostics.
func (p Pos) Compare(q Pos) int {
	if c := cmp.Compare(p.Line, q.Line); c != 0 {
		return c
	}
	return cmp.Compare(p.Col, q.Col)
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
	// Warnings lists non-fatal findings: unreachable steps, and every
	// field this build refuses to run (also in Refusals).
	Warnings []Diagnostic
	// Refusals lists the fields this build does not honour (see Fields):
	// unknown keys and refused ones. The engine refuses to start a
	// playbook that has any.
	Refusals []Diagnostic
	// Notes lists the hint fields the playbook uses (see Fields), with what
	// this build does instead; informational.
	Notes []Diagnostic
	// Entry is the step the workflow begins with: executor.spec.entry_step,
	// else start.
	Entry string
	// RequiresTools lists executor.requires.tools: kinds the run needs
	// registered.
	RequiresTools []Requirement
	// DefaultTimeout is executor.spec.policy.defaults.timeout_s: the
	// timeout of steps that set none. Zero means none.
	DefaultTimeout time.Duration
	Pos            Pos

	steps map[string]*Step
	// limits bound the renders of the playbook's templates (SetLimits).
	limits *limitsRef
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
	// Retry is the step's retry: block; it applies to each of its tasks
	// that has no retry of its own.
	Retry *Retry
	// Sink saves the step's result (each iteration's, in a loop) with
	// another tool, in the same command: a failing sink fails the work.
	Sink *Sink
	// OutputSelect keeps only these keys of the step's result data
	// (output.output_select); empty keeps everything.
	OutputSelect []string
	// OutputStore is the output block's store settings (NoETL's
	// output.store.kind and inline_max_bytes); nil when it has none.
	OutputStore *OutputStore
	// Extra holds unknown keys; they are reported in Playbook.Refusals.
	Extra map[string]*Value
	Pos   Pos
}

// Requirement is a name the playbook requires, with where it says so.
type Requirement struct {
	Name string
	Pos  Pos
}

// StepSpec is a step's spec block.
type StepSpec struct {
	// Timeout bounds one run of the step's tool chain; zero means none.
	// TimeoutTemplate, when set, replaces it at run (see ResolveTimeout).
	Timeout         time.Duration
	TimeoutTemplate *Template
	// OnError is NoETL's on_error hint ("fail", "continue", ...); empty
	// means fail.
	OnError string
	// Policy applies to a single-tool step when its task has no policy of
	// its own.
	Policy *Policy
	// Admit is spec.policy.admit: rules whose then.allow decides whether
	// the step runs at all. Nil admits.
	Admit *Policy
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
	// KeyPos is where each key of Config is written (a value's own Pos is
	// where its value starts), for messages about the key itself.
	KeyPos map[string]Pos
	// Policy is the task's spec.policy, or nil.
	Policy *Policy
	// Timeout is the task's spec.timeout; zero means none.
	// TimeoutTemplate, when set, replaces it at run.
	Timeout         time.Duration
	TimeoutTemplate *Template
	// Set assignments run after the task, rendered against output.
	Set []*Assignment
	// Retry is the task's retry: block, or nil.
	Retry *Retry
	// OutputStore is the task's output block's store settings, or nil.
	OutputStore *OutputStore
	// Sink saves the task's result with another tool, atomically with
	// the attempt.
	Sink *Sink
	// Action names the workbook action a kind: workbook task calls; its
	// Config["input"] holds the call's inputs. Target is the task the call
	// runs: the action's tool with the action's default inputs overridden
	// by the call's, and the call's policy, timeout, set, retry and sink
	// where it has them (filled by Parse).
	Action string
	Target *Task
	// Assert is a workbook action's assert block.
	Assert *Assert
	Pos    Pos
}

// Assert is a workbook action's contract: inputs it expects, result keys
// it returns.
type Assert struct {
	Expects []string
	Returns []string
	Pos     Pos
}

// Loop makes a step iterate over a collection (In) or drain a cursor.
type Loop struct {
	// In renders to the list to iterate over (in, or the design's
	// collection); nil for cursor loops.
	In *Value
	// Cursor is the cursor source; nil for collection loops.
	Cursor   *CursorSpec
	Iterator string
	// Mode is sequential, parallel (also written async), chunked or
	// cursor. Defaults to sequential for collection loops and cursor for
	// cursor loops.
	Mode string
	// MaxInFlight bounds concurrent items (parallel), chunks (chunked) or
	// frame slots (cursor); NoETL also calls it concurrency. Zero means the
	// default: 1 for sequential, unbounded up to the collection size for
	// parallel and chunked, 1 for cursor.
	MaxInFlight int
	// ChunkSize is how many items one command of a chunked loop runs, one
	// after another. Defaults to DefaultChunkSize.
	ChunkSize int
	// Templates holds the numeric fields written as templates
	// (max_in_flight, chunk_size), rendered when the loop starts.
	Templates map[string]*Template
	Frame     FrameSpec
	// Fanout configures mode fanout (loop.spec.loop_mode: fanout): the
	// collection is split into shards, each a durable command whose
	// iterator is the shard's list of items.
	Fanout FanoutSpec
	// Policy holds loop-level policy rules, if any.
	Policy *Policy
	// Sink saves each iteration's result, atomically with it.
	Sink *Sink
	Pos  Pos
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

// OutputStore is where NoETL's output block asks a result to be kept:
//
//	output:
//	  store: {kind: auto|memory|kv|object|s3|gcs|db|..., ttl, compression, ...}
//	  inline_max_bytes: 65536
//
// The engine has one result store: kind auto (or none) stores a result
// larger than InlineMaxBytes (default: the store's threshold), memory and
// inline keep it in the event log, any other kind stores it whatever its
// size. The store block's other keys (ttl, compression, bucket, ...)
// describe NoETL's tiers and are not used.
type OutputStore struct {
	Kind           string
	InlineMaxBytes int64
	Pos            Pos
}

// DefaultChunkSize is a chunked loop's chunk size when it sets none.
const DefaultChunkSize = 10

// Loop modes.
const (
	ModeSequential = "sequential"
	ModeParallel   = "parallel"
	ModeChunked    = "chunked"
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
	// MaxAttempts (max_attempts) is how many deliveries a row gets before
	// the driver dead-letters it (cursor.Spec.MaxAttempts), and, unless
	// frame.max_attempts is set, how many times a frame is issued before
	// the engine gives up on its rows. Zero: not set.
	MaxAttempts int
	// ReclaimAfter (reclaim_after, seconds or a duration such as "5m") is
	// NoETL's stale-claim timeout: claims silent for longer go back to be
	// claimed again. Here the engine holds the claims, so it bounds the
	// frame's lease: a frame whose worker is silent that long is re-issued
	// with its rows. Zero: not set.
	ReclaimAfter time.Duration
	// Options holds every other key of the cursor block.
	Options map[string]*Value
	// KeyPos is where each key of Options was written, for messages
	// about the key itself.
	KeyPos map[string]Pos
	Pos    Pos
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
	// HeartbeatSeconds is the heartbeat interval. A frame whose worker
	// misses about three heartbeats is re-issued before its lease ends.
	// Defaults to LeaseSeconds/HeartbeatsPerLease.
	HeartbeatSeconds float64
	// MaxSeconds bounds a frame's run time (process: row); rows not
	// started by then go back to the source (release) for a later frame,
	// neither run nor failed; the first row always starts. Zero means no
	// bound.
	MaxSeconds float64
	// MaxBytes bounds the claimed rows' encoded size; zero means no bound.
	MaxBytes int64
	// Process is row (default) or frame.
	Process string
	// MaxAttempts is how many attempts of a frame may be lost before its
	// rows are dead-lettered. Only attempts a worker took count: one whose
	// lease ran out before any worker took it (workers or transport down)
	// is issued again uncounted. Defaults to the cursor's max_attempts,
	// else 3.
	MaxAttempts int
	// Templates holds the fields written as templates, by key
	// (lease_seconds, max_rows, ...), rendered at run by Resolve.
	Templates map[string]*Template
	// KeyPos is where each key of the frame block was written: a field
	// absent from it was left to its default. Nil without a frame block.
	KeyPos map[string]Pos
	// hbFromLease: heartbeat_seconds defaults to a templated
	// lease_seconds/HeartbeatsPerLease, known only once it is rendered.
	hbFromLease bool
	// leaseCap is the cursor's reclaim_after in seconds (zero: none): the
	// longest lease, a rendered one included.
	leaseCap float64
}

// Next routes a finished step to its successors.
type Next struct {
	// Mode is exclusive (first matching arc, the default) or inclusive
	// (every matching arc).
	Mode string
	// OnNoMatch is NoETL's on_no_match: quiet (the default: a step whose
	// arcs all fail to match ends its branch) or error (the execution
	// fails). ignore and fail are accepted as synonyms.
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
	// Templates holds attempts and delay when written as templates.
	Templates map[string]*Template
	// Allow is an admission rule's verdict (then.allow); other rules
	// ignore it (validate warns).
	Allow *bool
	// To is the jump target (a pipeline task name or a step name).
	To  string
	Set []*Assignment
	Pos Pos

	allowPos Pos // where allow was written, for the warning
}

// Assignment is one `path: value` entry of a set block, such as
// ctx.total: '{{ output.data.row_count }}'.
type Assignment struct {
	// Path is the dotted target, e.g. "ctx.total" or "iter.page".
	Path  string
	Value *Value
	Pos   Pos
}

// Retry is a retry: block in NoETL's mapping form (max_attempts,
// retry_when, retry_on_status, backoff, ...) or the design's list form
// (when/then rules that retry on error or continue on success:
// pagination). Mapping-form fields fill Rules with one rule.
type Retry struct {
	// Rules are evaluated in order after each attempt; the first whose
	// condition holds decides.
	Rules []*RetryRule
	Pos   Pos
}

// RetryRule is one retry rule. A mapping-form block has exactly one rule,
// with When nil and its conditions in RetryWhen, OnStatus and On.
type RetryRule struct {
	// When is the list form's condition (nil in the mapping form).
	When *Template
	// RetryWhen, StopWhen, OnStatus and On are the mapping form's
	// conditions. With none of RetryWhen, OnStatus and On set, an attempt
	// is retried when it failed.
	RetryWhen *Template
	StopWhen  *Template
	OnStatus  []int64
	On        []string
	// MaxAttempts bounds attempts (pages) in all; defaults to
	// DefaultRetryAttempts, or DefaultPageAttempts for a paginating rule.
	MaxAttempts int
	// Backoff, Delay, Multiplier, MaxDelay and Jitter shape the wait
	// before the next attempt.
	Backoff    string
	Delay      time.Duration
	Multiplier float64
	MaxDelay   time.Duration
	Jitter     bool
	// NextCall overrides the tool's configuration for the next call
	// (params, url, headers, body, data, ...), rendered with response;
	// a rule with NextCall continues after a success (pagination).
	NextCall map[string]*Value
	// Collect gathers each page's data.
	Collect *Collect
	// Sink saves each attempt's (page's) result.
	Sink *Sink
	// Templates holds max_attempts and delay when written as templates.
	Templates map[string]*Template
	Pos       Pos
}

// DefaultPageAttempts bounds the pages of a paginating retry rule that
// sets no max_attempts.
const DefaultPageAttempts = 100

// Collect strategies.
const (
	CollectAppend  = "append"
	CollectReplace = "replace"
	CollectCollect = "collect"
)

// Collect says how the pages of a paginating retry are gathered into the
// step's result.
type Collect struct {
	// Strategy is append (extend a list with each page's items at Path),
	// replace (keep the last page's) or collect (a list of each page's
	// value at Path). Defaults to append.
	Strategy string
	// Path is a dotted path into the response body; empty is the whole
	// body.
	Path string
	// Into, if set, is a dotted path of the result data to put the
	// gathered value at; empty replaces the result's data.data (http) or
	// data.
	Into string
	Pos  Pos
}

// Sink saves a result with another tool: the sink's task runs after the
// work it belongs to succeeded, in the same command, with result, this,
// response and output naming the work's result.
type Sink struct {
	Task *Task
	Pos  Pos
}
