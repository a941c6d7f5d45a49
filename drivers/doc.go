// Package drivers holds cursorflow's cursor drivers, one subpackage per
// source so that importing one does not pull in the others' client
// libraries: postgres, sqlite, mysql, clickhouse (SQL), redisstream,
// natsconsumer and s3prefix. A host registers the ones it needs:
//
//	reg := cursor.NewRegistry()
//	reg.Register("postgres", postgres.New(postgres.Config{}))
//	reg.Register("sqlite", sqlite.New(sqlite.Config{}))
//
// The engine records a claim's rows in its log (frame.claimed, JSON) and
// a frame re-issued after a crash runs the rows it recorded, so a row's
// values must be what JSON holds. Bytes that are not valid UTF-8 are
// therefore given in base64 (standard encoding) by every driver, and
// valid UTF-8 is left as it is: the SQL drivers' binary columns (Values,
// below), redisstream's field names and values, natsconsumer's payloads
// (with data_base64: true) and s3prefix's bodies (with body_base64:
// true); each package documents its own.
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
//	        SELECT id FROM jobs WHERE status = 'pending'
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
// scope plus __frame_max_rows (the frame's max), __worker_slot_id (the
// frame slot's id, unique across loops and executions, stable across the
// slot's frames: a positive integer below 2^53) and __worker_slot_index
// (the slot's index, 0 .. max_in_flight-1). The driver runs it in a
// transaction that stays open until the engine has recorded the claimed
// rows in its log (frame.claimed) and commits it, or rolls it back when
// the record failed; a claimer that dies before that loses its connection
// and the database rolls the claim back. So every claimed row is either
// on record (a re-issued frame runs it) or claimable again: a claim needs
// no reclaim clause of its own (it may keep one). A claim may hold several
// statements, and the rows of the last statement that returns a result
// set are the claimed rows. Zero rows means drained (the transaction then
// commits at once, unless the claim buried rows past max attempts: see
// below); a claim that returns no result set at all is an
// error. The claim is trusted to honour __frame_max_rows: the rows of one
// that returns more (a LIMIT of its own) all run in the frame, none left
// claimed, and the cursor logs a warning the first time.
//
// Placeholders. Besides Jinja2, every statement (claim, ack, release,
// dead_letter, mysql's mark) may use NoETL's psycopg placeholders:
// %(name)s is replaced by the variable name of the statement's render
// context as a SQL literal (strings quoted and escaped for the
// database's dialect, numbers bare, NULL for nil, lists as (a, b, ...)),
// and %% by %, when the statement as written holds at least one
// placeholder (sqlcursor.FillParams): a value a template splices (a
// row's text through sql_literal) into a statement without one is never
// read as a placeholder.
//
// Values. Columns become JSON-friendly Go values: int64, float64, string,
// bool, nil; times as RFC 3339 strings in UTC; json/jsonb as maps and
// lists (integers as int64; past int64, a float64 where one holds the
// integer digit for digit, else its exact text; other numbers float64); arrays as lists; bytes as a string when valid UTF-8,
// else base64. postgres numeric and mysql DECIMAL are
// an int64 when integral and in range, a float64 when that float64 is the
// same decimal (12.50 is 12.5), else the decimal's exact text; unsigned
// integers past int64 (mysql BIGINT UNSIGNED) are their decimal text, so
// a key keeps every digit.
//
// Keys. Option key names the column or columns identifying a row (a
// string, comma-separated for a composite key, or a list). By default it
// is column id if the claim returns one, else the first column. Row.Key
// is the key's string form, composite keys joined with "/": tenant acme
// and id 3 are key acme/3. When a part of a composite key holds "/",
// the key is "/" followed by every part with "%" written %25 and "/"
// written %2F, joined with "/" (tenant a/b and id 3 are /a%2Fb/3), so that
// ("a/b", "c") and ("a", "b/c") do not share a key. A statement that
// rebuilds keys in SQL to reach rows by key must build them the same way;
// in PostgreSQL, SQLite and MySQL (CONCAT for ||):
//
//	CASE WHEN a LIKE '%/%' OR b LIKE '%/%'
//	     THEN '/' || replace(replace(a, '%', '%25'), '/', '%2F')
//	       || '/' || replace(replace(b, '%', '%25'), '/', '%2F')
//	     ELSE a || '/' || b END
//
// (with %% for % in a statement that uses %(name)s placeholders), or
// reach rows by their values (rows) instead. A claim that returns a
// row with NULL in a key column, or two rows with the same key (a key
// column that is not unique), is refused (sqlcursor.ErrNullKey,
// sqlcursor.ErrDuplicateKey) and rolled back, so no row of it runs or
// stays claimed: ack, release and dead_letter reach rows by key, and
// would settle such rows together.
//
// Attempts and the dead letter. When the claim returns a column named
// attempts, attempt or attempt_count, it is the row's Lease.Attempt (else
// 1). A row whose counter exceeds the loop's max attempts (the cursor's
// max_attempts, else frame.max_attempts) is handed to the dead_letter
// statement, inside the claim's transaction, and not returned; if that
// leaves a claim empty, the driver claims again in the same transaction
// (the dead_letter statement must take the rows it buries out of the
// claim's reach, as status = 'dead' does for a claim of status =
// 'pending' rows), so that zero rows still means drained; after 100 such
// rounds the claim returns what it set aside marked as not drained
// (cursor.Claim's More), and the engine claims again once it has recorded
// them. The
// claim lists those rows dead (cursor.Claim's Dead), and nothing of it
// commits before the engine has recorded that: aborting a claim, or a
// claimer that dies first, buries none of them, and a later claim lists
// them again. Without a dead_letter statement such rows are returned,
// with their attempt, for the engine's own policy. The engine dead-letters
// rows itself when it gives up on a frame (its lease ran out
// max_attempts times): it issues one more attempt of the frame that only
// runs the dead_letter statement for the recorded rows. Without a
// dead_letter statement the rows cannot be moved and stay claimed in the
// table (cursorflow validate warns where a cursor sets max_attempts or
// reclaim_after without one); the engine records them dead all the same
// and logs it loudly.
//
// ack, release, dead_letter. Optional SQL templates, run in their own
// transaction: ack after rows succeeded (for playbooks whose body does
// not mark rows done itself), release to hand rows back, dead_letter as
// above. They are compiled by the driver once per Open and rendered per
// call with the loop's scope plus keys (the list of Row.Key), rows (the
// list of the rows' column maps), errors (see below), reason
// (dead_letter only) and __worker_slot_id; the engine therefore passes them unrendered (the
// drivers implement cursor.TemplateOptioner). Keys come from the database
// and are inserted as text, so values must not be spliced in quotes by
// hand ('{{ x }}' breaks, or injects, on a value holding a quote): bind
// them — a statement may be {sql: ..., params: [...]}, the claim takes
// claim_params, each param rendered per call and bound to $1.. or ?
// (lists and maps as JSON text) — or quote them with the sql_literal
// filter ({{ rows | tojson | sql_literal }}::jsonb; in a driver's
// statements it and sql_ident quote for that driver's database unless
// given a dialect) or NoETL's %(name)s placeholders (filled as literals). Without an ack statement Ack does
// nothing: SQL drivers leave completion to the playbook's own SQL.
// Without a release statement Release cannot hand rows back and returns
// an error wrapping cursor.ErrUnsupported: the engine then runs rows it
// would have handed back (a cancelled execution's unstarted rows) rather
// than leave them claimed.
//
// Last errors. errors lists, in the order of keys and rows, one
// {"key": ..., "error": ...} object per row: on a release of rows whose
// body failed, the row's error as the frame's report records it (bounded
// and with the secrets the body's tools resolved redacted:
// cursor.Row.Error), and "" for a row handed back without having failed
// (a cancelled frame's unstarted rows) and in every other statement.
// Objects rather than a list of texts beside keys, so that one table
// function joins them to the table: jsonb_to_recordset (PostgreSQL),
// JSON_TABLE (MySQL), json_each (SQLite). A release that keeps the error
// in the row, and a dead_letter (run by the claim for rows past
// max_attempts) that moves the row, last_error included, to a dead
// table, so that the dead table says why each row died:
//
//	release:
//	  sql: >-
//	    UPDATE jobs j SET status = 'pending', last_error = COALESCE(NULLIF(e.error, ''), j.last_error)
//	      FROM jsonb_to_recordset($1::jsonb) AS e(key text, error text)
//	     WHERE j.id = e.key::bigint
//	  params: ['{{ errors }}']
//	dead_letter:
//	  sql: >-
//	    WITH d AS (DELETE FROM jobs WHERE id IN (SELECT jsonb_array_elements_text($1::jsonb)::bigint) RETURNING *)
//	    INSERT INTO jobs_dead (id, payload, attempts, last_error, reason)
//	    SELECT id, payload, attempts, last_error, $2 FROM d
//	  params: ['{{ keys }}', '{{ reason }}']
//
// MySQL and MariaDB read errors with JSON_TABLE, SQLite with json_each:
//
//	UPDATE jobs JOIN JSON_TABLE(?, '$[*]' COLUMNS (k VARCHAR(255) PATH '$.key',
//	    error TEXT PATH '$.error')) AS e ON jobs.id = e.k
//	   SET jobs.status = 'pending', jobs.last_error = COALESCE(NULLIF(e.error, ''), jobs.last_error)
//
//	UPDATE jobs SET status = 'pending', last_error = COALESCE(NULLIF(e.error, ''), last_error)
//	  FROM (SELECT CAST(value ->> 'key' AS INTEGER) AS id, value ->> 'error' AS error
//	          FROM json_each(?)) AS e
//	 WHERE jobs.id = e.id
//
// A release statement that does not name errors behaves as it always
// did.
//
// Leases. A SQL table holds no lease of its own: Lease.Deadline is zero
// and Features.LeaseExpiry false. Rows of a claimer that died mid-frame
// come back through the engine's frame lease: the engine re-issues the
// frame, with the rows it recorded in its log, once its worker missed a
// few heartbeats. Postgres, mysql and sqlite have Features.TransactionalClaim;
// SQL drivers do not fence stale holders.
//
// Guarantee. At least once, nothing lost: a row's body runs again only
// when a frame is re-issued after its worker died or went silent once the
// claim was recorded, or when the claim's COMMIT failed after the record
// (the engine then runs the recorded rows, which may meanwhile be claimed
// again). No row stays claimed by a claim the engine does not know of.
//
// Connections. Drivers cache connections per credential, so Open is cheap
// enough to call once per frame. A claim holds its connection (and, in
// SQLite, the database's write lock) from the claim to its commit: the
// round trip of the engine's record. A claim, ack or release that fails
// because the server dropped the connection is retried once on a fresh
// connection; a dropped backend never commits, so the retry cannot claim
// twice.
package drivers
