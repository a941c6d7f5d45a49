package engine_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
	"github.com/cursorflow/cursorflow/tools"
)

// okTools is a registry whose one tool, ok, succeeds at once.
func okTools() *tools.Registry {
	reg := tools.NewRegistry()
	reg.MustRegister("ok", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	return reg
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

// jobsQueue makes a SQLite queue (see sqlitetest.Queue) whose table jobs
// holds n pending jobs, ids 1 to n, in columns id and status.
func jobsQueue(t *testing.T, n int) (*sql.DB, string) {
	t.Helper()
	return sqlitetest.Queue(t, fmt.Sprintf(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT NOT NULL DEFAULT 'pending');
		WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d)
		INSERT INTO jobs (id) SELECT i FROM s`, n))
}

// jobsPlaybook is a playbook draining jobsQueue's table as users write it:
// the natural claim, then the cursor's other statements (lines such as
// "ack: UPDATE ..."), the loop's spec.frame (a flow mapping) with
// max_in_flight slots, and tool (a flow mapping) as the body.
func jobsPlaybook(statements []string, slots int, frame, tool string) string {
	var stmts strings.Builder
	for _, st := range statements {
		stmts.WriteString("\n        " + st)
	}
	return header + fmt.Sprintf(`
workflow:
  - step: start
    loop:
      cursor:
        kind: sqlite
        auth: q
        claim: |
          UPDATE jobs SET status = 'claimed'
          WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }})
          RETURNING id%s
      iterator: job
      spec:
        mode: cursor
        max_in_flight: %d
        frame: %s
    tool: %s
`, stmts.String(), slots, frame, tool)
}

// Statements of jobsPlaybook's cursor.
const (
	jobsAck     = `ack: UPDATE jobs SET status = 'done' WHERE id IN ({{ keys | join(',') }})`
	jobsRelease = `release: UPDATE jobs SET status = 'pending' WHERE id IN ({{ keys | join(',') }})`
)
