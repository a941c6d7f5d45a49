-- Snapshots: readers' folds of an execution up to seq, opaque to the log
-- (see eventlog.Snapshots). One per execution and format, so processes of
-- two versions never read each other's.
CREATE TABLE snapshots (
	execution_id TEXT    NOT NULL,
	format       TEXT    NOT NULL,
	seq          INTEGER NOT NULL,
	data         BLOB    NOT NULL,
	saved_at     INTEGER NOT NULL, -- unix nanoseconds
	PRIMARY KEY (execution_id, format)
) WITHOUT ROWID;
