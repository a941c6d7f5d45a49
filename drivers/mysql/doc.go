// Package mysql is the MariaDB (10.6+) and MySQL (8.0+) cursor driver
// (go-sql-driver/mysql). A host registers it under the kind its
// playbooks use:
//
//	reg := cursor.NewRegistry()
//	if err := reg.Register("mysql", mysql.New(mysql.Config{})); err != nil {
//		return err
//	}
//	eng, err := engine.New(engine.Config{Cursors: reg, ...})
//
// # Credential
//
// The credential (resolved by the engine from the cursor block's auth
// alias) is a go-sql-driver DSN, user:pass@tcp(host:3306)/db?params, or a
// mysql:// (or mariadb://) URL. The driver forces multiStatements=true
// (a claim may hold several statements) and parseTime=true (DATE,
// DATETIME and TIMESTAMP become RFC 3339 strings, in UTC unless the
// credential sets loc; a zero date stays "0000-00-00" or "0000-00-00
// 00:00:00", as PyMySQL returns it). It keeps one database/sql pool per credential
// (Config.MaxOpenConns, 8 by default). A new connection (dial, handshake
// and authentication) gives up after Config.ConnectTimeout (10 s), or
// the credential's timeout parameter when it sets one, so a server that
// accepts and never answers fails the claim (transiently: the engine
// tries it again for up to a minute) instead of holding it for ever.
// Errors never quote the credential.
//
// # Claim and mark
//
// Neither MariaDB nor MySQL has UPDATE ... RETURNING, so a claim is two
// statements in ONE transaction (READ COMMITTED, so InnoDB takes no gap
// locks and concurrent claimers skip each other's rows):
//
//   - claim, a template rendered with the loop scope plus __frame_max_rows
//     and __worker_slot_id, normally SELECT ... FOR UPDATE SKIP LOCKED: it
//     locks and returns the rows. It may hold several statements; the
//     last result set is the claimed rows.
//   - mark, an option rendered per claim, after the SELECT, with the loop
//     scope plus keys (the claimed rows' keys), rows (their column maps)
//     and __worker_slot_id: an UPDATE that marks exactly those rows as
//     claimed. It runs only when the claim returned rows.
//
// The transaction stays open, holding the rows' locks, until the engine
// has recorded the claimed rows (frame.claimed) and commits it, or rolls
// it back when the record failed; a claimer that dies first loses its
// connection and the server rolls the claim back. A claimer that stalls
// with its connection open (a paused process, a frozen VM) holds the
// rows, which SKIP LOCKED claims walk past, until MariaDB closes its
// connection once the claim's transaction has sat idle for the frame lease
// (Spec.Lease rounded up to whole seconds: each claim sets the session's
// idle_transaction_timeout, idle_write_transaction_timeout and
// idle_readonly_transaction_timeout in the batch it sends anyway) and
// rolls the claim back; the engine does not let the drain end before
// then. The variables stay set on the pooled connection, where they reach
// only a transaction left idle, never a connection waiting in the pool.
// MySQL has no such variable (wait_timeout would close idle pooled
// connections as well): the driver notices the refusal once per pool,
// logs it and claims without it, and a stalled claimer there holds its
// rows until its connection closes. No other claimer can get
// the rows between the SELECT and the UPDATE, and no claim exists that the
// engine does not know of. A playbook says:
//
//	cursor:
//	  kind: mysql
//	  auth: mysql_queue
//	  claim: |
//	    SELECT id, payload, attempts + 1 AS attempts
//	      FROM jobs
//	     WHERE status = 'pending'
//	     ORDER BY id
//	     LIMIT {{ __frame_max_rows }}
//	       FOR UPDATE SKIP LOCKED
//	  mark: UPDATE jobs SET status = 'claimed', attempts = attempts + 1, claimed_at = NOW(6) WHERE id IN ({{ keys | join(',') }})
//	  ack: UPDATE jobs SET status = 'done' WHERE id IN ({{ keys | join(',') }})
//	  release: UPDATE jobs SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(',') }})
//	  dead_letter: UPDATE jobs SET status = 'dead' WHERE id IN ({{ keys | join(',') }})
//
// The SELECT sees the rows before the mark, so a claim that counts
// deliveries returns attempts + 1 AS attempts, the count the mark
// records. A claim without mark must mark rows itself (for example an
// UPDATE ... LIMIT then a SELECT of the rows it updated, keyed by a
// claim token such as CONNECTION_ID() or __worker_slot_id).
//
// Keys, values, attempts, ack, release, dead_letter: as for every SQL
// driver (package drivers and cursor/sqlcursor): option key names the key
// column(s), an attempts column is Lease.Attempt, rows past max attempts
// go through dead_letter, and ack, release and dead_letter run in their
// own transaction. Bind values (claim_params, {sql, params} statements
// with ? placeholders) or quote them with sql_literal (in this driver's
// statements it quotes for MySQL, as sql_ident does) rather than splice
// them in quotes. DECIMAL columns become int64 when
// integral, else float64; MySQL's JSON columns are decoded (MariaDB's
// JSON is LONGTEXT and stays a string); BIT becomes an int64; binary
// data that is not UTF-8 becomes base64.
//
// # Guarantees
//
// Delivery is at least once (Features.TransactionalClaim). SKIP LOCKED
// plus the mark in the claim's transaction mean that no two claimers, in
// any number of processes, hold a row at once. A table has no lease of
// its own: rows of a claimer that died mid-frame come back through the
// engine's frame lease (it re-runs the rows recorded in its log), and a
// claimer that died before the record never committed its claim; the
// claim needs no reclaim clause. A row runs twice only when its frame is
// re-issued or its claim's COMMIT failed after the record. The driver
// does not fence stale holders (Features.Fencing is false); Ack is a
// no-op without an ack statement, and Release without a release statement
// reports cursor.ErrUnsupported.
//
// A statement that fails because the server dropped the connection
// (restart, KILL, proxy timeout) is retried once on a fresh connection;
// a deadlock or lock wait timeout is retried up to three times. A dropped
// connection never commits, so a retry cannot claim twice.
package mysql
