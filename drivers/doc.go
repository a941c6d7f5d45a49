// Package drivers holds cursorflow's cursor drivers, one subpackage per
// source so that importing one does not pull in the others' client
// libraries: postgres, sqlite, mysql, clickhouse (SQL), redisstream,
// natsconsumer and s3prefix. A host registers the ones it needs:
//
//	reg := cursor.NewRegistry()
//	reg.Register("postgres", postgres.New(postgres.Config{}))
//	reg.Register("sqlite", sqlite.New(sqlite.Config{}))
//
// # SQL drivers
//
// A SQL cursor block names a claim statement that atomically marks up to
// __frame_max_rows rows as claimed and returns them:
//
//	loop:
//	  cursor:
//	    kind: postgres
//	    auth: pg_k8s
//	    claim: |
//	      WITH candidate AS (
//	        SELECT id FROM jobs
//	         WHERE status = 'pending'
//	            OR (status = 'claimed' AND claimed_at < now() - interval '5 minutes')
//	         ORDER BY id FOR UPDATE SKIP LOCKED
//	         LIMIT {{ __frame_max_rows | default(1) | int }})
//	      UPDATE jobs j SET status = 'claimed', attempts = j.attempts + 1, claimed_at = now()
//	        FROM candidate c WHERE j.id = c.id
//	      RETURNING j.id, j.payload, j.attempts;
//	    key: id                      # optional
//	    ack:                       # keys bound as a JSON list, never spliced
//	      sql: UPDATE jobs SET status = 'done' WHERE id IN (SELECT jsonb_array_elements_text($1::jsonb)::bigint)
//	      params: ['{{ keys }}']
//	    release: UPDATE jobs SET status = 'pending' WHERE id IN ({{ keys | join(',') }})
//	    dead_letter: UPDATE jobs SET status = 'dead', error = {{ reason | sql_literal }} WHERE id IN ({{ keys | join(',') }})
//	  iterator: job
//	  spec: {mode: cursor, max_in_flight: 4, frame: {max_rows: 100, lease_seconds: 60}}
//
// Claim. The claim is a template rendered for every claim with the loop's
// scope plus __frame_max_rows (the frame's max) and __worker_slot_id (the
// frame slot, 0 .. max_in_flight-1). The driver runs it in one
// transaction; a claim may hold several statements, and the rows of the
// last statement that returns a result set are the claimed rows. Zero
// rows means drained; a claim that returns no result set at all is an
// error. The claim is trusted to honour __frame_max_rows.
//
// Values. Columns become JSON-friendly Go values: int64, float64, string,
// bool, nil; times as RFC 3339 strings in UTC; json/jsonb as maps and
// lists (integral numbers as int64); arrays as lists; bytes as a string
// when valid UTF-8, else base64. postgres numeric is an int64 when
// integral and in range, else a float64.
//
// Keys. Option key names the column or columns identifying a row (a
// string, comma-separated for a composite key, or a list). By default it
// is column id if the claim returns one, else the first column. Row.Key
// is the key's string form, composite keys joined with "/".
//
// Attempts and the dead letter. When the claim returns a column named
// attempts, attempt or attempt_count, it is the row's Lease.Attempt (else
// 1). A row whose counter exceeds the loop's max attempts is handed to the
// dead_letter statement and not returned; if that leaves a claim empty,
// the driver claims again, so that zero rows still means drained. Without
// a dead_letter statement such rows are returned, with their attempt, for
// the engine's own policy. The engine may also dead-letter rows itself
// (cursor.DeadLetterer); without a dead_letter statement that fails with
// cursor.ErrUnsupported.
//
// ack, release, dead_letter. Optional SQL templates, run in their own
// transaction: ack after rows succeeded (for playbooks whose body does
// not mark rows done itself), release to hand rows back, dead_letter as
// above. They are compiled by the driver once per Open and rendered per
// call with the loop's scope plus keys (the list of Row.Key), rows (the
// list of the rows' column maps), reason (dead_letter only) and
// __worker_slot_id; the engine therefore passes them unrendered (the
// drivers implement cursor.TemplateOptioner). Keys come from the database
// and are inserted as text, so values must not be spliced in quotes by
// hand ('{{ x }}' breaks, or injects, on a value holding a quote): bind
// them — a statement may be {sql: ..., params: [...]}, the claim takes
// claim_params, each param rendered per call and bound to $1.. or ?
// (lists and maps as JSON text) — or quote them with the sql_literal
// filter ({{ rows | tojson | sql_literal }}::jsonb).
// Without these options Ack and Release do nothing: SQL drivers leave
// completion to the playbook's own SQL.
//
// Leases. A SQL table holds no lease of its own: Lease.Deadline is zero
// and Features.LeaseExpiry false. Rows of a claimer that died mid-frame
// come back either through the engine's frame lease (the engine re-runs
// the rows it recorded in its log) or through a reclaim clause in the
// claim, as in the example above. SQL drivers do not fence stale holders.
//
// Connections. Drivers cache connections per credential, so Open is cheap
// enough to call once per frame. A claim, ack or release that fails
// because the server dropped the connection is retried once on a fresh
// connection (postgres); a dropped backend never commits, so the retry
// cannot claim twice.
package drivers
