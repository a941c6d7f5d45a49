-- execution.started is stored once per execution: Append refuses a batch
-- with a second one (eventlog.AlreadyStartedError). The check runs under
-- the executions row lock every append takes, which serializes appends to
-- one execution across processes; this index makes it one probe. Not
-- UNIQUE: a log written before the rule may hold two starts of one
-- execution, and must still migrate.
CREATE INDEX events_execution_started ON {{schema}}.events (execution_id) WHERE type = 'execution.started';
