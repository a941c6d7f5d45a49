-- The third idempotence rule of eventlog.Log: a fan-out loop's fan-in is
-- recorded once per loop.
CREATE UNIQUE INDEX events_loop_fanin ON events (execution_id, loop_id) WHERE type = 'loop.fanin.completed';
