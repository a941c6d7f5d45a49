package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/internal/drivertest"
)

// harness implements cursortest.Harness on tables of one database file.
// Its own handle plays the playbook body's connection, a second writer
// next to the driver's.
type harness struct {
	drv  *sqlite.Driver
	db   *sql.DB
	path string
	seq  atomic.Int64
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	dsn, err := sqlite.DSN(path, sqlite.DefaultBusyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	h := &harness{drv: sqlite.New(sqlite.Config{}), db: db, path: path}
	t.Cleanup(func() {
		_ = h.drv.Close()
		_ = db.Close()
	})
	return h
}

func (h *harness) Driver() cursor.Driver { return h.drv }

const nowMS = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`

var claimSQL = `UPDATE {{ workload.table }}
   SET status = 'claimed', attempts = attempts + 1, claimed_at = ` + nowMS + `
 WHERE id IN (
   SELECT id FROM {{ workload.table }}
    WHERE status = 'pending'{% if workload.lease_ms %}
       OR (status = 'claimed' AND claimed_at < ` + nowMS + ` - {{ workload.lease_ms }}){% endif %}
    ORDER BY id LIMIT {{ __frame_max_rows | default(1) | int }})
RETURNING id, payload, attempts{% if workload.echo %}, {{ __worker_slot_id }} AS slot, {{ __worker_slot_index }} AS slot_index, {{ __frame_max_rows }} AS frame_max{% endif %}`

func (h *harness) createTable(t testing.TB, n int) string {
	t.Helper()
	table := fmt.Sprintf("q%d", h.seq.Add(1))
	ctx := context.Background()
	_, err := h.db.ExecContext(ctx, `CREATE TABLE `+table+` (
		id INTEGER PRIMARY KEY,
		payload TEXT NOT NULL,
		status TEXT NOT NULL DEFAULT 'pending',
		attempts INTEGER NOT NULL DEFAULT 0,
		claimed_at INTEGER)`)
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	if n > 0 {
		_, err = h.db.ExecContext(ctx, `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
			INSERT INTO `+table+` (id, payload) SELECT n, json_object('n', n) FROM g`, n)
		if err != nil {
			t.Fatalf("fill table: %v", err)
		}
	}
	return table
}

func (h *harness) NewQueue(t *testing.T, n int, opts cursortest.QueueOptions) (cursor.Spec, []string) {
	t.Helper()
	table := h.createTable(t, n)
	spec := drivertest.TableQueue{
		Kind:       "sqlite",
		Auth:       "local_db",
		Credential: "sqlite:" + h.path,
		Claim:      claimSQL,
		Table:      table,
	}.Spec(t, opts)
	return spec, drivertest.SeqKeys(n)
}

func (h *harness) Complete(ctx context.Context, spec cursor.Spec, rows []cursor.Row) error {
	keys := make([]string, len(rows))
	for i, r := range rows {
		if _, err := strconv.ParseInt(r.Key, 10, 64); err != nil {
			return fmt.Errorf("key %q: %w", r.Key, err)
		}
		keys[i] = r.Key
	}
	_, err := h.db.ExecContext(ctx, `UPDATE `+drivertest.TableOf(spec)+` SET status = 'done' WHERE id IN (`+strings.Join(keys, ",")+`)`)
	return err
}

func (h *harness) DeadLettered(t *testing.T, spec cursor.Spec) []string {
	t.Helper()
	rows, err := h.db.QueryContext(context.Background(), `SELECT CAST(id AS TEXT) FROM `+drivertest.TableOf(spec)+` WHERE status = 'dead' ORDER BY id`)
	return drivertest.Strings(t, rows, err)
}

func (h *harness) DropConnections(t *testing.T, _ cursor.Spec) {
	t.Skip("sqlite is embedded: there is no server to drop the driver's connections")
}
