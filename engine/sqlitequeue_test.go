package engine_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// sqliteQueue makes a queue in a temporary SQLite file set up by schema
// and returns it with the file's path. It is closed when the test ends.
func sqliteQueue(t *testing.T, schema string) (*sql.DB, string) {
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

// sqliteEngine returns an engine on an in-memory log, with reg's tools,
// that claims from the SQLite file at path through the sqlite cursor
// driver under the credential alias q. It is closed when the test ends,
// before the queue.
func sqliteEngine(t *testing.T, path string, reg *tools.Registry) (*engine.Engine, *eventlog.Memory) {
	t.Helper()
	cursors := cursor.NewRegistry()
	_ = cursors.Register("sqlite", sqlitedriver.New(sqlitedriver.Config{}))
	t.Cleanup(func() { _ = cursors.Close() })
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Cursors: cursors, Tick: 5 * time.Millisecond,
		Keychain: tools.StaticURLs(map[string]string{"q": path})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, log
}
