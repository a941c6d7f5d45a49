// Package sqlite stores an eventlog.Log in a SQLite file, through the pure
// Go driver modernc.org/sqlite (no cgo). It is cursorflow's embedded
// default: durable, zero-administration, and fast enough for thousands of
// batched appends per second.
//
// # Layout and guarantees
//
// Open puts the file in WAL mode with synchronous=FULL (a commit is atomic
// and on the disk when the append returns: it survives a process crash, an
// operating system crash and a power loss; Config.Synchronous = SyncNormal
// trades the last two for speed: a flush per append cost a frame drain
// about 2% where it was measured) and applies the embedded, versioned
// migrations recorded in a schema_version table.
//
// Appends are serialized in-process on one writer connection; each batch
// is one IMMEDIATE transaction that reads the execution's last_seq from
// the executions table, inserts the events, and updates the executions
// row. Duplicate command.issued, loop.done and loop.fanin.completed
// events are rejected by UNIQUE
// partial indexes (INSERT ... ON CONFLICT DO NOTHING), so the check is
// atomic with the insert. Reads use a separate pool of read-only
// connections, which WAL lets run while a write is in progress.
//
// Event times are stored as Unix nanoseconds (so years 1678 to 2262),
// payload and meta as JSON text.
//
// Several Log values, in one process or many, may open the same file:
// their writers take turns through SQLite's file lock, waiting up to
// Config.BusyTimeout.
//
// A reader that must not write (cursorflow status and events) opens the
// file with Config.ReadOnly: no migration, no WAL recovery or checkpoint,
// so it opens on a full disk or a read-only file system too, reading the
// main file alone (SQLite's immutable mode) when the -shm file the WAL
// needs cannot be made and the WAL holds nothing.
//
// # Wait
//
// An append through a Log wakes that Log's waiters at once. Appends made
// by other processes (or another Log value on the same file) cannot be
// signalled, so a blocked Wait also re-reads the execution every
// Config.PollInterval (250ms by default); that poll is one indexed
// primary-key lookup.
package sqlite
