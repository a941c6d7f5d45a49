-- The third idempotence rule of eventlog.Log: a fan-out loop's fan-in is
-- recorded once per loop, however many orchestrators decide it.
CREATE UNIQUE INDEX events_loop_fanin ON {{schema}}.events (execution_id, loop_id) WHERE type = 'loop.fanin.completed';
