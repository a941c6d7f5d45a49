// Package sqlitetest makes SQLite work queues for tests: a temporary file
// in WAL mode, set up by a schema, that the sqlite cursor driver claims
// from while the test reads and writes it.
package sqlitetest

import (
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Queue makes a queue in a temporary SQLite file set up by schema and
// returns it with the file's path. It waits up to 10s for a lock the
// engine holds (busy_timeout) and is closed when the test ends.
func Queue(t testing.TB, schema string) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	return db, path
}
