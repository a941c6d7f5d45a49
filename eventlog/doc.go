// Package eventlog is cursorflow's source of truth: an append-only,
// per-execution ordered history of events from which the engine rebuilds
// every execution's state.
//
// # The contract
//
// Log (see its methods) stores batches of Events atomically and in one
// round trip to its backend. Within an execution every stored event gets
// the next Seq (1, 2, 3, ... without gaps) and every event an ID that is
// unique and increasing across the log. Three event types are idempotent,
// and the log, not the engine, enforces it atomically with the insert:
//
//   - command.issued is stored once per (execution_id, command_id);
//   - loop.done is stored once per (execution_id, loop_id);
//   - loop.fanin.completed is stored once per (execution_id, loop_id).
//
// A repeat, whether in a later Append or later in the same batch, is
// skipped without error and reported as Result.Duplicate; it consumes no
// Seq. Of any number of concurrent appends of the same command.issued,
// from goroutines or processes, exactly one is stored: that is what makes
// issuing a command, or firing a loop's completion, safe to retry.
//
// Nothing is stored after an execution's terminal event
// (execution.completed, .failed or .cancelled): every later event of it,
// in a later Append or later in the same batch, is skipped and reported
// as Result.Duplicate too, so a late decision of an orchestrator that
// missed the end (two processes drove the execution) cannot follow it.
//
// execution.started is stored once per execution_id too, but a second one
// is a conflict, not a retry (two callers chose the same execution id):
// the batch holding it is refused whole with an *AlreadyStartedError
// (errors.Is(err, ErrAlreadyStarted)), atomically with the insert, so of
// two processes starting one execution at once exactly one succeeds.
//
// Wait blocks until an execution grows past a seq, so an orchestrator or
// a watcher can follow a history without polling it. Executions lists the
// executions to resume after a restart, or a page of them for a list to
// show (see ExecutionsQuery).
//
// Every event is checked by Validate before anything is stored; a batch
// with an invalid event is rejected whole with an error wrapping
// ErrInvalidEvent.
//
// # Snapshots
//
// Every backend here also implements Snapshots: it keeps, per execution
// and format, one opaque Snapshot of a reader's fold up to a seq, replaced
// only by a further one. A reader that restarts, or runs on another
// machine, continues from it and reads only the events after its seq
// (the engine's Projection does, to answer status requests without
// folding a long history). Snapshots never replace the history: the log
// stays the only authority, and a snapshot can always be rebuilt from it.
//
// # Backends
//
//   - Memory (NewMemory, this package): the history lives in the process.
//     It is the embedded mode's log and enforces exactly the same rules as
//     the durable backends.
//   - eventlog/sqlite: one SQLite file (pure Go driver, no cgo), the
//     embedded default for a history that survives restarts.
//   - eventlog/postgres: PostgreSQL, for many processes on many machines.
//   - eventlog/eventlogurl opens any of them from a URL ("memory:",
//     "sqlite:PATH", "postgres://...").
//
// Each backend is its own package, so a program links only the client
// library it uses. All of them pass the conformance suite in
// eventlog/logtest, which a new backend runs too.
package eventlog
