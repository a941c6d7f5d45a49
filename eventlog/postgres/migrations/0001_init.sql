-- {{schema}} is replaced by the quoted schema name.

-- Events: the append-only history. Every unique index includes
-- execution_id, so the table can later be hash/range partitioned by
-- execution_id (or by time, adding it to the keys) without changing the
-- append statement. id comes from a sequence rather than an identity
-- column for the same reason (PostgreSQL < 17 has no identity columns on
-- partitioned tables).
CREATE TABLE {{schema}}.events (
	id           bigserial   NOT NULL,
	execution_id text        NOT NULL,
	seq          bigint      NOT NULL,
	type         text        NOT NULL,
	step         text,
	command_id   text,
	loop_id      text,
	frame        bigint      NOT NULL DEFAULT 0,
	attempt      bigint      NOT NULL DEFAULT 0,
	worker_id    text,
	payload      jsonb,
	meta         jsonb,
	time         timestamptz NOT NULL,
	PRIMARY KEY (execution_id, seq)
);
-- The two idempotence rules of eventlog.Log.
CREATE UNIQUE INDEX events_command_issued ON {{schema}}.events (execution_id, command_id) WHERE type = 'command.issued';
CREATE UNIQUE INDEX events_loop_done ON {{schema}}.events (execution_id, loop_id) WHERE type = 'loop.done';

-- One row per execution, maintained by Append in the same transaction. Its
-- row lock serializes appends to one execution across processes.
CREATE TABLE {{schema}}.executions (
	execution_id text        PRIMARY KEY,
	last_seq     bigint      NOT NULL DEFAULT 0,
	first_id     bigint,               -- id of the first event: "oldest first"
	started      boolean     NOT NULL DEFAULT false, -- the first event is execution.started
	started_at   timestamptz,          -- time of the first event
	terminal     text,                 -- type of the first terminal event
	finished_at  timestamptz
);
CREATE INDEX executions_first_id ON {{schema}}.executions (first_id);
CREATE INDEX executions_unfinished ON {{schema}}.executions (first_id) WHERE started AND terminal IS NULL;
