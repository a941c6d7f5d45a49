// Package sqlite is the SQLite cursor driver (modernc.org/sqlite, pure
// Go), for embedded single-host queues.
//
//	reg := cursor.NewRegistry()
//	reg.Register("sqlite", sqlite.New(sqlite.Config{}))
//
// The credential is a file path, sqlite:PATH, sqlite://PATH or a file:
// URI. The database must exist: the driver opens it with mode=rw (unless
// a file: URI sets a mode), so a mistyped path fails Open with an error
// naming the path instead of leaving an empty database behind. The driver
// opens the database in WAL mode with a busy timeout
// (Config.BusyTimeout, 5 s by default) and runs every claim, ack and
// release in a BEGIN IMMEDIATE transaction, so a claim holds SQLite's
// write lock from its first read and two processes never claim the same
// row. Within a process, the driver keeps one connection per database and
// queues statements on it, which avoids SQLITE_BUSY storms between
// cursors of the same process.
//
// A claim's transaction stays open until the engine has recorded the
// claimed rows (frame.claimed), then commits; it rolls back when the
// record failed, and a process that dies first never commits it (the
// lock dies with the process and the uncommitted claim is never seen).
// The open window holds the write lock and the driver's connection for
// the record's round trip: other claims, acks and writes to the same file
// wait for it (within BusyTimeout for other processes), so keep the event
// log in another database file. Guarantee: at least once; no claim exists
// that the engine does not know of, and a claim needs no reclaim clause.
// Claims exclude each other (Features.ExclusiveClaim): a claim that finds
// no rows proves that no claimer holds any, so a drain ends at once even
// right after a lost frame attempt, where a PostgreSQL or MySQL source
// (SKIP LOCKED) makes the engine wait a frame lease for the lost
// attempt's rows to come back.
//
// SQLite has UPDATE ... RETURNING since 3.35, so a claim is one statement:
//
//	UPDATE jobs SET status = 'claimed', attempts = attempts + 1
//	 WHERE id IN (SELECT id FROM jobs WHERE status = 'pending'
//	              ORDER BY id LIMIT {{ __frame_max_rows }})
//	RETURNING id, payload, attempts
//
// A claim may hold several statements; the last one returns the rows.
// Options, keys, attempts, dead letter and value conversion: see package
// drivers.
package sqlite
