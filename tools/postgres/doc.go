// Package postgres is cursorflow's postgres tool, compatible with NoETL's
// `kind: postgres` tasks.
//
// Task configuration:
//
//	auth | credential      keychain alias (or NoETL's {credential: alias}
//	                       object) whose URL is the connection string
//	command | query | sql  the SQL, one or more statements
//	params                 values of $1, $2, ... (a list), bound over the
//	                       extended protocol: the SQL is then one statement
//
// Values from rows, items or requests belong in params (or, spliced into
// the SQL text, through the sql_literal and sql_ident template filters),
// never quoted by hand: '{{ x }}' breaks, or injects, on a value with a
// quote in it.
//
//	command: INSERT INTO t (id, doc) VALUES ($1, $2::jsonb)
//	params: ['{{ iter.row.id }}', '{{ iter.row }}']
//
// A param is sent as text and typed by the server from the statement
// (cast with $n::type where the statement does not say): nil is NULL,
// numbers and booleans are their text, maps their JSON, and lists an
// array where the statement wants one (id = ANY($1), $1::text[]; the
// server is asked how it types the statement, one round trip more) and
// their JSON elsewhere.
//
// Without params the SQL goes to the server as written, in one
// simple-protocol query: the tool never splits statements itself, so
// comments, quotes and
// dollar-quoted bodies ("-- don't split me", DO $$ ... $$) reach the
// server intact. The server runs the statements in one implicit
// transaction unless the SQL manages its own, so an error rolls back the
// whole command.
//
// Data is {"columns", "rows", "row_count"} of the LAST statement that
// returned a row set (a SELECT, or a statement with RETURNING — even one
// with zero rows): columns is the list of names, rows a list of
// {column: value} maps, row_count len(rows). When no statement returned a
// row set, columns and rows are empty and row_count is the number of rows
// the last statement affected (as NoETL reports it).
//
// Values are decoded from the text format by column type into plain,
// JSON-friendly Go values: bool → bool; int2/int4/int8/oid → int64;
// float4/float8 → float64 (NaN and ±Infinity stay strings); numeric →
// int64 when integral and in range, float64 when float64 holds the
// decimal exactly (12.50 → 12.5), otherwise its exact text; json/jsonb →
// the parsed value (integers int64; past int64 a float64 where that holds them digit
// for digit, else their exact text);
// timestamptz → RFC 3339 with offset; timestamp → ISO 8601 without zone; arrays of the types above → []any
// (nested for several dimensions); NULL → nil; everything else (text,
// uuid, date, interval, bytea as \x..., ...) → its text.
//
// A server error is an error Output whose Error is pgx's "ERROR: message
// (SQLSTATE code)" (plus DETAIL when the server gives one) and whose Data
// is {"sqlstate", "retryable"}. A failure to connect is an error Output
// naming the alias — never the URL or password — with Data
// {"retryable": true}, so a retry policy can handle it. A statement that
// ran out of time (the step's spec.timeout, or the server's
// statement_timeout or lock_timeout) also has Data "timeout": true, which
// policy rules see as output.error.kind "timeout". An unknown alias or a
// missing command is a returned error.
//
// A statement that fails because the server ended its connection (a
// restart, a failover, pg_terminate_backend: 57P01-57P03, class 08, or the
// connection closed) runs once more on a fresh connection, after the
// pool drops its other connections, which most likely died too; the
// server rolled the failed statement back, so the body runs at least
// once, as a cursor loop's rows do anyway. It is not retried when rows of
// it were already handed on as partial results. A second loss is an
// error Output as above.
//
// The tool keeps one pgxpool per credential URL, created on first use and
// shared by every call; Close releases them. Pools hold up to
// DefaultMaxConns connections unless the URL's pool_max_conns or
// Config.MaxConns says otherwise. A connection returned inside an open
// transaction is discarded rather than reused. On PostgreSQL 14 and later
// each connection sets client_connection_check_interval to
// ClientCheckInterval (1s) unless the URL sets it: a statement whose
// process was killed then ends within that second, rolling back and
// dropping its row locks, instead of running to its end (a hung body for
// as long as it hangs) while a resume of the execution waits on them.
//
// While a statement's rows arrive, they are handed on in batches of
// Config.PartialRows (default 100) as partial results, {"statement": n,
// "rows": [...], "rows_read": total so far} (see tools.Call.EmitPartial).
package postgres
