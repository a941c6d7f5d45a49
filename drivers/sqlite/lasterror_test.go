package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// TestPlaybookDeadLetterKeepsLastError drains a queue with max_attempts 2
// whose body fails for row p2 with a distinctive message. The release
// statement keeps each failed row's error (the errors variable, read
// with json_each) in last_error, and the dead_letter statement, which the
// claim runs once p2 is past max_attempts, copies the row, last_error
// included, to a dead table: the dead table must say why the row died.
func TestPlaybookDeadLetterKeepsLastError(t *testing.T) {
	db, path := sqlitetest.Queue(t, `CREATE TABLE ex9_jobs (id INTEGER PRIMARY KEY, payload TEXT NOT NULL,
		status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT);
		CREATE TABLE ex9_dead (id INTEGER PRIMARY KEY, payload TEXT, attempts INTEGER, last_error TEXT, reason TEXT);
		INSERT INTO ex9_jobs (payload) VALUES ('p1'), ('p2'), ('p3')`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	body := fn.New(func(_ context.Context, call *tools.Call) (any, error) {
		if call.Config["payload"] == "p2" {
			return nil, errors.New("ex9 upstream refused p2 (HTTP 418, it's a teapot)")
		}
		return nil, nil
	})
	drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/lasterror_drain.yaml",
		Kind:         "sqlite",
		Driver:       sqlite.New(sqlite.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"queue_db": "sqlite:" + path}),
		Workload:     map[string]any{"table": "ex9_jobs", "dead": "ex9_dead"},
		Tools:        map[string]tools.Tool{"body": body},
	})

	rows, err := db.QueryContext(ctx, `SELECT payload || ':' || status FROM ex9_jobs ORDER BY id`)
	if got, want := drivertest.Strings(t, rows, err), []string{"p1:done", "p3:done"}; !slices.Equal(got, want) {
		t.Errorf("queue rows %v, want %v (p2 moved to the dead table)", got, want)
	}
	var payload, reason string
	var attempts int
	var lastError sql.NullString
	err = db.QueryRowContext(ctx, `SELECT payload, attempts, last_error, reason FROM ex9_dead`).Scan(&payload, &attempts, &lastError, &reason)
	if err != nil {
		t.Fatalf("the dead table holds no single row: %v", err)
	}
	if payload != "p2" || attempts != 3 || !strings.Contains(reason, "max_attempts 2") {
		t.Errorf("dead row %s after %d claims, reason %q; want p2 after 3, past max_attempts 2", payload, attempts, reason)
	}
	if !strings.Contains(lastError.String, "ex9 upstream refused p2 (HTTP 418, it's a teapot)") {
		t.Errorf("dead row's last_error %q (valid %v), want the body's error", lastError.String, lastError.Valid)
	} else {
		t.Logf("last_error: %s", lastError.String)
	}
}
