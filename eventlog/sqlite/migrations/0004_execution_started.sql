-- execution.started is stored once per execution: Append refuses a batch
-- with a second one (eventlog.AlreadyStartedError). The check runs inside
-- the append's IMMEDIATE transaction, which serializes writers; this
-- index makes it one probe. Not UNIQUE: a log written before the rule
-- may hold two starts of one execution, and must still open.
CREATE INDEX events_execution_started ON events (execution_id) WHERE type = 'execution.started';
