package engine_test

import (
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
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
