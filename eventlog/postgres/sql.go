package postgres

import "fmt"

// statements holds the SQL of a Log, qualified with its schema.
type statements struct {
	lock, append, appendPlain, notify, read, lastSeq string
	// executions[unfinished][newestFirst] reads a page of Executions
	// after a first_id; firstID finds the first_id of an After.
	executions                          [2][2]string
	firstID, saveSnapshot, loadSnapshot string
}

func newStatements(schema string) statements {
	f := func(q string) string { return fmt.Sprintf(q, schema) }
	return statements{
		// lock creates the executions rows of a batch if missing and locks
		// them, in execution_id order so that concurrent batches touching
		// several executions cannot deadlock. WHERE false: the conflicting
		// row is locked but not rewritten.
		lock: f(`INSERT INTO %[1]s.executions AS x (execution_id)
			SELECT DISTINCT u.id FROM unnest($1::text[]) AS u(id) ORDER BY u.id
			ON CONFLICT (execution_id) DO UPDATE SET last_seq = x.last_seq WHERE false`),

		// append runs after lock, as a separate statement of the same
		// transaction: under READ COMMITTED it takes a fresh snapshot, which
		// therefore holds every event committed to these executions (their
		// appenders released the locks we now hold), and nobody else can
		// append to them until we commit. So duplicates are found exactly,
		// in the log and within the batch (first occurrence wins), and seqs
		// are assigned only to stored events: contiguous, without gaps.
		append: f(`WITH input AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[],
				$7::bigint[], $8::text[], $9::text[], $10::text[], $11::timestamptz[]) WITH ORDINALITY
				AS t(execution_id, type, step, command_id, loop_id, frame, attempt, worker_id, payload, meta, at, ord)
		), marked AS (
			-- Scalar subqueries (not EXISTS, not joins): they always run as
			-- per-row probes of the unique indexes, so even a cached generic
			-- plan never scans or hashes the tables.
			SELECT i.*, CASE
				WHEN i.type = 'command.issued' THEN
					row_number() OVER (PARTITION BY i.execution_id, i.type, i.command_id ORDER BY i.ord) > 1
					OR (SELECT e.seq FROM %[1]s.events e WHERE e.execution_id = i.execution_id
						AND e.type = 'command.issued' AND e.command_id = i.command_id) IS NOT NULL
				WHEN i.type = 'loop.done' THEN
					row_number() OVER (PARTITION BY i.execution_id, i.type, i.loop_id ORDER BY i.ord) > 1
					OR (SELECT e.seq FROM %[1]s.events e WHERE e.execution_id = i.execution_id
						AND e.type = 'loop.done' AND e.loop_id = i.loop_id) IS NOT NULL
				WHEN i.type = 'loop.fanin.completed' THEN
					row_number() OVER (PARTITION BY i.execution_id, i.type, i.loop_id ORDER BY i.ord) > 1
					OR (SELECT e.seq FROM %[1]s.events e WHERE e.execution_id = i.execution_id
						AND e.type = 'loop.fanin.completed' AND e.loop_id = i.loop_id) IS NOT NULL
				ELSE false END
				-- Nothing is stored after an execution's terminal event (a
				-- late decision of an orchestrator that missed the end).
				OR (SELECT x.terminal FROM %[1]s.executions x WHERE x.execution_id = i.execution_id) IS NOT NULL
				OR coalesce(bool_or(i.type IN ('execution.completed', 'execution.failed', 'execution.cancelled'))
					OVER (PARTITION BY i.execution_id ORDER BY i.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), false)
				AS dup,
				-- A second execution.started refuses the whole batch (ins
				-- stores nothing). The executions row lock makes the probe
				-- exact, as for the duplicates above; the partial index
				-- events_execution_started makes it one probe.
				CASE WHEN i.type = 'execution.started' THEN
					row_number() OVER (PARTITION BY i.execution_id, i.type ORDER BY i.ord) > 1
					OR (SELECT e.seq FROM %[1]s.events e WHERE e.execution_id = i.execution_id
						AND e.type = 'execution.started' LIMIT 1) IS NOT NULL
				ELSE false END AS restart,
				(SELECT x.last_seq FROM %[1]s.executions x WHERE x.execution_id = i.execution_id) AS last_seq
			FROM input i
		), numbered AS (
			SELECT m.*, m.last_seq + count(*) FILTER (WHERE NOT m.dup)
				OVER (PARTITION BY m.execution_id ORDER BY m.ord) AS seq
			FROM marked m
		), ins AS (
			INSERT INTO %[1]s.events (execution_id, seq, type, step, command_id, loop_id, frame, attempt,
				worker_id, payload, meta, time)
			SELECT execution_id, seq, type, nullif(step, ''), nullif(command_id, ''), nullif(loop_id, ''),
				frame, attempt, nullif(worker_id, ''), nullif(payload, ''), nullif(meta, ''), at
			FROM numbered WHERE NOT dup AND NOT EXISTS (SELECT 1 FROM marked WHERE restart) ORDER BY ord
			RETURNING id, execution_id, seq, type, time
		), agg AS (
			SELECT execution_id, max(seq) AS last_seq, min(id) AS first_id,
				(array_agg(type ORDER BY seq))[1] AS first_type,
				(array_agg(time ORDER BY seq))[1] AS first_time,
				(array_agg(type ORDER BY seq) FILTER (WHERE type IN
					('execution.completed', 'execution.failed', 'execution.cancelled')))[1] AS terminal,
				(array_agg(time ORDER BY seq) FILTER (WHERE type IN
					('execution.completed', 'execution.failed', 'execution.cancelled')))[1] AS finished_at
			FROM ins GROUP BY execution_id
		), upd AS (
			UPDATE %[1]s.executions x SET
				last_seq = a.last_seq,
				first_id = coalesce(x.first_id, a.first_id),
				started = CASE WHEN x.first_id IS NULL THEN a.first_type = 'execution.started' ELSE x.started END,
				started_at = coalesce(x.started_at, a.first_time),
				terminal = coalesce(x.terminal, a.terminal),
				finished_at = coalesce(x.finished_at, a.finished_at)
			FROM agg a WHERE x.execution_id = a.execution_id
		)
		SELECT n.dup, n.restart, i.id, i.seq
		FROM numbered n LEFT JOIN ins i ON NOT n.dup AND i.execution_id = n.execution_id AND i.seq = n.seq
		ORDER BY n.ord`),

		// appendPlain is append for the batch a drain appends most: one
		// execution that has events and has not ended, no event with a
		// rule of its own but command.issued (plainIssued). It is the whole
		// append in one statement, without lock: its UPDATE takes the
		// executions row lock and reserves the batch's seqs at once (under
		// READ COMMITTED an UPDATE that waited for a concurrent append
		// re-reads the row that append committed). It stores nothing and
		// returns no row when the execution has no events yet, has ended,
		// or has one of the batch's command.issued ($13, their command_ids)
		// on record: the caller runs append, which knows what to do. That
		// probe reads the statement's snapshot, which misses an append
		// committed while the UPDATE waited for its lock; the unique index
		// events_command_issued refuses what it missed, aborting the
		// transaction with nothing stored. Else it returns the batch's ids
		// and seqs in order. $12 is the number of events. It notifies no
		// one: the Log's notifier does, once it has committed (notifier).
		appendPlain: f(`WITH x AS (
			UPDATE %[1]s.executions SET last_seq = last_seq + $12
			WHERE execution_id = $1 AND first_id IS NOT NULL AND terminal IS NULL
				-- A scalar subquery per command_id: a probe of the index
				-- each, where = ANY would filter all of the execution's.
				AND NOT EXISTS (SELECT FROM unnest($13::text[]) AS c(id)
					WHERE (SELECT e.seq FROM %[1]s.events e WHERE e.execution_id = $1
						AND e.type = 'command.issued' AND e.command_id = c.id) IS NOT NULL)
			RETURNING last_seq - $12 AS base
		), ins AS (
			INSERT INTO %[1]s.events (execution_id, seq, type, step, command_id, loop_id, frame, attempt,
				worker_id, payload, meta, time)
			SELECT $1, x.base + i.ord, i.type, nullif(i.step, ''), nullif(i.command_id, ''), nullif(i.loop_id, ''),
				i.frame, i.attempt, nullif(i.worker_id, ''), nullif(i.payload, ''), nullif(i.meta, ''), i.at
			FROM x, unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[],
				$7::bigint[], $8::text[], $9::text[], $10::text[], $11::timestamptz[]) WITH ORDINALITY
				AS i(type, step, command_id, loop_id, frame, attempt, worker_id, payload, meta, at, ord)
			ORDER BY i.ord
			RETURNING id, seq
		)
		SELECT id, seq FROM ins ORDER BY seq`),

		// notify is sent once the appends it announces have committed, so
		// a woken Wait sees their events (notifier).
		notify: `SELECT pg_notify($1, u.id) FROM unnest($2::text[]) AS u(id)`,

		read: f(`SELECT id, seq, type, coalesce(step, ''), coalesce(command_id, ''), coalesce(loop_id, ''),
			frame, attempt, coalesce(worker_id, ''), payload, meta, time
			FROM %[1]s.events WHERE execution_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`),

		lastSeq: f(`SELECT last_seq FROM %[1]s.executions WHERE execution_id = $1`),

		// Each an index range scan: executions_first_id, and the partial
		// executions_unfinished, whose predicate the unfinished ones repeat.
		executions: [2][2]string{
			{
				f(`SELECT execution_id, first_id FROM %[1]s.executions WHERE first_id > $1 ORDER BY first_id LIMIT $2`),
				f(`SELECT execution_id, first_id FROM %[1]s.executions WHERE first_id < $1 ORDER BY first_id DESC LIMIT $2`),
			},
			{
				f(`SELECT execution_id, first_id FROM %[1]s.executions WHERE started AND terminal IS NULL AND first_id > $1
					ORDER BY first_id LIMIT $2`),
				f(`SELECT execution_id, first_id FROM %[1]s.executions WHERE started AND terminal IS NULL AND first_id < $1
					ORDER BY first_id DESC LIMIT $2`),
			},
		},
		firstID: f(`SELECT first_id FROM %[1]s.executions WHERE execution_id = $1`),

		// saveSnapshot replaces a snapshot only with a further one.
		saveSnapshot: f(`INSERT INTO %[1]s.snapshots AS s (execution_id, format, seq, data) VALUES ($1, $2, $3, $4)
			ON CONFLICT (execution_id, format) DO UPDATE SET seq = EXCLUDED.seq, data = EXCLUDED.data, saved_at = now()
			WHERE s.seq < EXCLUDED.seq`),
		loadSnapshot: f(`SELECT seq, data FROM %[1]s.snapshots WHERE execution_id = $1 AND format = $2`),
	}
}
