package engine

import (
	"context"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
)

// Command is one unit of work handed to a worker: run a step's tool chain,
// run it for one loop item, or claim and run one frame of a cursor loop.
type Command struct {
	ExecutionID string
	// ID is "base@attempt", the command's fencing token: a report that
	// carries an ID other than the current attempt's is refused.
	ID      string
	Base    string
	Attempt int
	Kind    string
	Step    string
	Run     string
	// Playbook is the execution's parsed playbook.
	Playbook *dsl.Playbook
	// Scope is the render context (workload, results, ctx, vars, ...),
	// without iter; read-only.
	Scope map[string]any
	// Args are the arguments an arc passed to the step.
	Args map[string]any
	// Item and Index are a collection loop item and its position.
	Item  any
	Index int
	// Slot and Frame number a cursor frame; Rows are set when the frame is
	// re-issued with the rows its first attempt claimed.
	Slot  int
	Frame int
	Rows  []FrameRow
	// StartTask, TaskAttempt and Carry resume a pipeline after a retry.
	StartTask   int
	TaskAttempt int
	Carry       map[string]any
	// Lease is how long the command may go without a heartbeat.
	Lease time.Duration
	// Pool names the worker pool that should run the command (empty: any).
	Pool string
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
