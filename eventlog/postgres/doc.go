// Package postgres stores an eventlog.Log in PostgreSQL through pgx v5,
// for orchestrators and workers spread over many processes and machines.
//
// # Schema
//
// Open (or New, with a pool the host already has) creates Config.Schema
// ("cursorflow" by default) and applies the embedded, versioned migrations
// under a pg_advisory_lock, recording them in schema_version. The tables:
//
//   - events: one row per event, PRIMARY KEY (execution_id, seq), id from
//     a sequence, payload and meta as text (the JSON bytes appended,
//     validated by Append before they are sent and returned as they
//     were; compressed with lz4 where the server has it), and UNIQUE
//     partial indexes on
//     (execution_id, command_id) WHERE type = 'command.issued' and on
//     (execution_id, loop_id) WHERE type = 'loop.done' and WHERE type =
//     'loop.fanin.completed'.
//   - executions: one row per execution with last_seq, the first event's
//     id and time, whether it began with execution.started, and its
//     terminal type; Append maintains it.
//
// Migration 0004 turned payload and meta from jsonb into json, and 0006
// from json into text (the server no longer parses every payload a second
// time): on a log made before them, the first Open of the new version
// rewrites events, holding its table lock meanwhile, so upgrade a large
// log at a quiet time.
//
// events can be hash- or range-partitioned by execution_id (or by time,
// added to the keys) because every unique index includes execution_id;
// the append statement does not change.
//
// # Append
//
// A batch costs one round trip and one transaction. The batch a cursor
// drain appends most (one execution that has events and has not ended;
// a frame's done, the next command.issued and its claim; no
// execution.started, loop.done, loop.fanin.completed or terminal event
// and no command_id issued twice) is one statement: an UPDATE of the
// executions row that locks it and reserves the batch's seqs from
// last_seq (under READ COMMITTED an UPDATE that waited for a concurrent
// append re-reads the row that append committed, so appends to one
// execution from any process serialize on it) and the INSERT of the
// events. Its UPDATE also probes
// events_command_issued for the batch's command.issued events: with one
// on record (a resent batch) it stores nothing, and the batch is sent
// again as below (a second round trip, only for a resent batch). The
// probe reads the statement's snapshot, which misses an append committed
// while the UPDATE waited for the row lock (two processes appending the
// same command at once); the unique index itself refuses what it missed,
// rolling the batch back (an error line in the server's log), and the
// batch is sent again the same way. Where the pool prepares statements
// (pgx's default mode) this statement, and an AppendGuard's before it,
// is prepared on each connection by name and its parameters are encoded
// in binary into a buffer kept for the next append, not through pgx's
// encoder, which grew a buffer for a frame's payloads from nothing at
// every append; from a pool in any other mode (exec or simple protocol
// behind a pooler in transaction mode, say) it goes through pgx.
//
// Any other batch, or that one when its execution has no events yet or
// has ended, is a pipeline of two statements under one Sync, which
// PostgreSQL runs as one implicit transaction. The first inserts-or-locks
// the batch's executions rows in execution_id order (so concurrent
// appends to one execution serialize on that row and multi-execution
// batches cannot deadlock). The second, running in a fresh READ
// COMMITTED snapshot that therefore sees every earlier append, marks
// duplicates (against the table and earlier in the batch), numbers the
// rest from last_seq, inserts them and updates the executions rows in a
// single CTE. Any error rolls the whole batch back.
//
// No append notifies: PostgreSQL serializes the commits of transactions
// that NOTIFY (each holds a database-wide lock from its NOTIFY until its
// commit is flushed), so a NOTIFY in each append made concurrent appends,
// from any process, commit one at a time. Measured with eight executions
// appending frames at once, that cost a third of the appends' rate. Once
// an append has committed, the Log's notifier sends the NOTIFY in a
// statement of its own, for every execution appended since its last: at
// once when it has been idle, at most once per Config.NotifyInterval
// (10ms) while appends keep coming. Close sends what is pending.
//
// # A server that stops answering
//
// Every call but Wait is bounded by Config.OperationTimeout (30s by
// default): a frozen server, or a connection a firewall or a failover
// left black-holed, fails the call with an error wrapping
// eventlog.ErrUnavailable ("no answer within 30s") instead of holding it
// for as long as the connection looks alive. A read of a long execution
// comes in pages of 5000 events, each bounded alone. The engine takes the
// failure as an outage: it reloads the execution from the log and its
// workers send their reports again, on a fresh connection.
//
// A read (Read, Wait's re-read, Executions, LoadSnapshot) that fails
// because the server ended the session it ran on (a restart, a failover,
// pg_terminate_backend: the pool may still hold such sessions, idle) runs
// once more on a new session; a pool made by Open is reset first. An
// append is not repeated that way, since it may have committed: its error
// goes to the caller (the engine reloads the execution and sees).
//
// # Wait
//
// Each Log keeps one dedicated connection (opened on first Wait, outside
// the pool) that LISTENs on a channel named after the schema; the payload
// of a notification is the execution id, and the listener wakes that
// execution's waiters (at most Config.NotifyInterval after the append;
// a waiter in the appending process is woken by the append itself). If the connection drops, it reconnects with backoff
// and wakes every waiter to re-check; meanwhile waiters re-read their
// execution every Config.PollInterval.
package postgres
