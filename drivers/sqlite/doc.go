// Package sqlite is the SQLite cursor driver (modernc.org/sqlite, pure
// Go), for embedded single-host queues.
//
//	reg := cursor.NewRegistry()
//	reg.Register("sqlite", sqlite.New(sqlite.Config{}))
//
// The credential is a file path, sqlite:PATH, sqlite://PATH or a file:
// URI. The driver opens the database in WAL mode with a busy timeout
// (Config.BusyTimeout, 5 s by default) and runs every claim, ack and
// release in a BEGIN IMMEDIATE transaction, so a claim holds SQLite's
// write lock from its first read and two processes never claim the same
// row. Within a process, the driver keeps one connection per database and
// queues statements on it, which avoids SQLITE_BUSY storms between
// cursors of the same process.
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
