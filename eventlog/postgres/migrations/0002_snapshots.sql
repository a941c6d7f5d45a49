-- Snapshots: readers' folds of an execution up to seq, opaque to the log
-- (see eventlog.Snapshots). One per execution and format, so processes of
-- two versions never read each other's.
CREATE TABLE {{schema}}.snapshots (
	execution_id text        NOT NULL,
	format       text        NOT NULL,
	seq          bigint      NOT NULL,
	data         bytea       NOT NULL,
	saved_at     timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (execution_id, format)
);
