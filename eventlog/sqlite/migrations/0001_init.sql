-- Events: the append-only history. id is the rowid, so it increases with
-- every insert (the log never deletes).
CREATE TABLE events (
	id           INTEGER PRIMARY KEY,
	execution_id TEXT    NOT NULL,
	seq          INTEGER NOT NULL,
	type         TEXT    NOT NULL,
	step         TEXT,
	command_id   TEXT,
	loop_id      TEXT,
	frame        INTEGER NOT NULL DEFAULT 0,
	attempt      INTEGER NOT NULL DEFAULT 0,
	worker_id    TEXT,
	payload      TEXT,
	meta         TEXT,
	time         INTEGER NOT NULL -- unix nanoseconds, UTC
);
CREATE UNIQUE INDEX events_execution_seq ON events (execution_id, seq);
-- The two idempotence rules of eventlog.Log.
CREATE UNIQUE INDEX events_command_issued ON events (execution_id, command_id) WHERE type = 'command.issued';
CREATE UNIQUE INDEX events_loop_done ON events (execution_id, loop_id) WHERE type = 'loop.done';

-- One row per execution, maintained by Append in the same transaction.
CREATE TABLE executions (
	execution_id TEXT    PRIMARY KEY,
	last_seq     INTEGER NOT NULL,
	first_id     INTEGER NOT NULL,           -- id of the first event: "oldest first"
	started      INTEGER NOT NULL,           -- 1 if the first event is execution.started
	started_at   INTEGER NOT NULL,           -- time of the first event
	terminal     TEXT,                       -- type of the first terminal event
	finished_at  INTEGER
) WITHOUT ROWID;
CREATE INDEX executions_first_id ON executions (first_id);
