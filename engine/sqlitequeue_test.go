package engine_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
	"github.com/cursorflow/cursorflow/tools"
)

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

// jobsQueue makes a SQLite queue (see sqlitetest.Queue) whose table jobs
// holds n pending jobs, ids 1 to n, in columns id and status.
func jobsQueue(t *testing.T, n int) (*sql.DB, string) {
	t.Helper()
	return sqlitetest.Queue(t, fmt.Sprintf(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT NOT NULL DEFAULT 'pending');
		WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d)
		INSERT INTO jobs (id) SELECT i FROM s`, n))
}
