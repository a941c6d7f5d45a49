// Package postgres is the PostgreSQL cursor driver (pgx v5).
//
//	reg := cursor.NewRegistry()
//	reg.Register("postgres", postgres.New(postgres.Config{}))
//
// The credential (Spec.Credential, resolved by the engine from the cursor
// block's auth alias) is a postgres:// URL or a key=value DSN. The driver
// keeps one pgxpool per credential (Config.MaxConns connections, 8 by
// default) and acquires a connection only for the duration of one
// statement, so a cursor holds nothing between claims.
//
// Claims run with the simple query protocol: the rendered claim may hold
// several statements (for example SET LOCAL lock_timeout before the
// claim), which PostgreSQL runs as one implicit transaction, and the
// rows of the last statement that returns a result set are the claim. A
// claim of the form
//
//	WITH candidate AS (
//	  SELECT id FROM jobs WHERE status = 'pending'
//	  ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
//	UPDATE jobs j SET status = 'claimed', attempts = j.attempts + 1
//	  FROM candidate c WHERE j.id = c.id
//	RETURNING j.id, j.payload, j.attempts
//
// is safe under any number of concurrent claimers in any number of
// processes. A statement that fails because the server dropped the
// connection (restart, failover, pg_terminate_backend) is retried once on
// a fresh connection after resetting the pool.
//
// Options, keys, attempts, dead letter, value conversion: see package
// drivers. Parse errors of the credential are reported without the
// credential's text, so a password never reaches a log.
package postgres
