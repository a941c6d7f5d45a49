package engine_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	pgdriver "github.com/cursorflow/cursorflow/drivers/postgres"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
	"github.com/cursorflow/cursorflow/tools/noop"
)

// urlCursorPlaybook is a playbook a stranger submits: a cursor loop whose
// source is a url of its choosing, not a keychain alias.
func urlCursorPlaybook(kind, url, claim string) string {
	return header + fmt.Sprintf(`
workflow:
  - step: start
    loop:
      cursor:
        kind: %s
        url: '%s'
        claim: %s
      iterator: row
      spec: {mode: cursor, max_in_flight: 1, frame: {max_rows: 10, process: frame}}
    tool: {kind: noop}
`, kind, url, claim)
}

// urlCursorEngine returns an engine with the sqlite and postgres cursor
// drivers, an empty keychain and allow as its Config.AllowCursorURL.
func urlCursorEngine(t *testing.T, allow bool) (*engine.Engine, eventlog.Log) {
	t.Helper()
	cursors := cursor.NewRegistry()
	_ = cursors.Register("sqlite", sqlitedriver.New(sqlitedriver.Config{}))
	_ = cursors.Register("postgres", pgdriver.New(pgdriver.Config{}))
	t.Cleanup(func() { _ = cursors.Close() })
	b := setupWith(t, engine.Config{Cursors: cursors, AllowCursorURL: allow})
	b.reg.MustRegister("noop", noop.New())
	return b.eng, b.log
}

// TestCursorURLIsOptIn: a cursor's url option reaches sources no keychain
// entry vetted with the worker's own rights, so an engine takes it only
// when its host says so (Config.AllowCursorURL). Without: a SQLite file
// on the worker (a local secret) is neither read nor written, a missing
// path is not created, and a postgres:// url pointing at a server the
// playbook's author runs gets no connection, and so not the worker's
// PGPASSWORD, which pgx sends to whatever server asks for it.
func TestCursorURLIsOptIn(t *testing.T) {
	db, victim := sqlitetest.Queue(t, `CREATE TABLE creds (id INTEGER PRIMARY KEY, secret TEXT NOT NULL);
		INSERT INTO creds VALUES (1, 'worker-local-secret-ABC')`)
	steal := `UPDATE creds SET id = -id WHERE id > 0 RETURNING id, secret`
	secretOf := func(t *testing.T) string {
		t.Helper()
		var id int
		if err := db.QueryRow(`SELECT id FROM creds`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(id)
	}
	refused := func(t *testing.T, sum *engine.Summary, evs []eventlog.Event) {
		t.Helper()
		if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "loop.cursor.url") ||
			!strings.Contains(sum.Error, "auth:") || !strings.Contains(sum.Error, engine.ErrCursorURL.Error()) {
			t.Errorf("status %s, error %q: want failed on loop.cursor.url, pointing to auth:", sum.Status, sum.Error)
		}
		for _, ev := range evs {
			if strings.Contains(string(ev.Payload), "worker-local-secret") {
				t.Errorf("event %d (%s) holds the worker's local secret: %s", ev.Seq, ev.Type, ev.Payload)
			}
		}
	}

	t.Run("sqlite file", func(t *testing.T) {
		e, log := urlCursorEngine(t, false)
		sum, evs := runPlaybook(t, e, log, urlCursorPlaybook("sqlite", victim, steal), engine.StartOptions{}, time.Minute)
		defer dumpOnFail(t, evs)
		refused(t, sum, evs)
		if got := secretOf(t); got != "1" {
			t.Errorf("the worker's SQLite file was written: creds.id is %s, want 1", got)
		}
	})

	t.Run("sqlite path created", func(t *testing.T) {
		e, log := urlCursorEngine(t, false)
		planted := filepath.Join(t.TempDir(), "planted.db")
		sum, evs := runPlaybook(t, e, log, urlCursorPlaybook("sqlite", planted, `SELECT 1 AS id WHERE 0`), engine.StartOptions{}, time.Minute)
		defer dumpOnFail(t, evs)
		refused(t, sum, evs)
		if _, err := os.Stat(planted); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (stat: %v): a playbook created a file on the worker", planted, err)
		}
	})

	t.Run("postgres to the author's server", func(t *testing.T) {
		t.Setenv("PGPASSWORD", "ambient-pg-password")
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		e, log := urlCursorEngine(t, false)
		url := "postgres://produser@" + ln.Addr().String() + "/prod?connect_timeout=5"
		// A worker that connects retries the silent server for a minute:
		// the hang guard fails the test first.
		sum, evs := runPlaybook(t, e, log, urlCursorPlaybook("postgres", url, `SELECT 1 AS id WHERE false`), engine.StartOptions{}, 20*time.Second)
		defer dumpOnFail(t, evs)
		refused(t, sum, evs)
		// A connection the driver made is queued in the listener's
		// backlog by now: an Accept that may not wait finds it.
		_ = ln.(*net.TCPListener).SetDeadline(time.Now())
		if c, err := ln.Accept(); err == nil {
			c.Close()
			t.Error("the worker connected to the server the playbook's url names")
		}
	})

	t.Run("allowed", func(t *testing.T) {
		// The operator's own playbook (the CLI's local run) may name its
		// file.
		e, log := urlCursorEngine(t, true)
		sum, evs := runPlaybook(t, e, log, urlCursorPlaybook("sqlite", victim, steal), engine.StartOptions{}, time.Minute)
		defer dumpOnFail(t, evs)
		if sum.Status != engine.StatusCompleted {
			t.Fatalf("status %s (%s), want completed", sum.Status, sum.Error)
		}
		if got := secretOf(t); got != "-1" {
			t.Errorf("creds.id is %s, want -1: the claim did not run", got)
		}
	})
}
