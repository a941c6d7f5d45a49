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
//     a sequence, payload and meta as json (the bytes appended, returned
//     as they were; compressed with lz4 where the server has it), and
//     UNIQUE partial indexes on
//     (execution_id, command_id) WHERE type = 'command.issued' and on
//     (execution_id, loop_id) WHERE type = 'loop.done' and WHERE type =
//     'loop.fanin.completed'.
//   - executions: one row per execution with last_seq, the first event's
//     id and time, whether it began with execution.started, and its
//     terminal type; Append maintains it.
//
// Migration 0004 turned payload and meta from jsonb into json: on a log
// made before it, the first Open of the new version rewrites events once,
// holding its table lock meanwhile, so upgrade a large log at a quiet time.
//
// events can be hash- or range-partitioned by execution_id (or by time,
// added to the keys) because every unique index includes execution_id;
// the append statement does not change.
//
// # Append
//
// A batch costs one round trip: pgx pipelines three statements under one
// Sync, which PostgreSQL runs as one implicit transaction. The first
// inserts-or-locks the batch's executions rows in execution_id order (so
// concurrent appends to one execution, from any process, serialize on
// that row and multi-execution batches cannot deadlock). The second,
// running in a fresh READ COMMITTED snapshot that therefore sees every
// earlier append, marks duplicates (against the table and earlier in the
// batch), numbers the rest from last_seq, inserts them and updates the
// executions rows in a single CTE. The third queues a NOTIFY, delivered at
// commit. Any error rolls the whole batch back.
//
// The batch a cursor drain appends most (one execution; a frame's done,
// the next command.issued and its claim) takes a leaner second statement:
// with no loop.done, loop.fanin.completed, execution.started or terminal
// event and no command_id twice, only the command.issued events can be
// duplicates, so it numbers the batch from last_seq without window
// functions, unless one of them is on record already. Then it stores
// nothing and the batch is sent again with the general statement (a
// second round trip, only for a resent batch).
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
// # Wait
//
// Each Log keeps one dedicated connection (opened on first Wait, outside
// the pool) that LISTENs on a channel named after the schema; the payload
// of a notification is the execution id, and the listener wakes that
// execution's waiters. If the connection drops, it reconnects with backoff
// and wakes every waiter to re-check; meanwhile waiters re-read their
// execution every Config.PollInterval.
package postgres
