package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/mysql"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// admin opens the test server's base database with the driver's own
// credential rules (multi statements on).
func admin(t testing.TB) (*sql.DB, *gomysql.Config) {
	t.Helper()
	base := testenv.MySQL(t)
	cfg, err := mysql.ParseCredential(base)
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.EnvMySQL, err)
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	return db, cfg
}

// harness implements cursortest.Harness. Every queue is a table q in a
// database of its own, and the queue's credential names that database,
// so the driver keeps a pool per queue and DropConnections can find the
// queue's connections in the process list by their database.
type harness struct {
	drv    *mysql.Driver
	admin  *sql.DB
	base   *gomysql.Config
	prefix string
	seq    atomic.Int64
	mu     sync.Mutex
	dbs    []string
}

func newHarness(t testing.TB, cfg mysql.Config) *harness {
	t.Helper()
	db, base := admin(t)
	h := &harness{drv: mysql.New(cfg), admin: db, base: base, prefix: "cursortest_" + testenv.RandomSuffix(t)}
	t.Cleanup(func() {
		_ = h.drv.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, name := range h.dbs {
			if _, err := db.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
				t.Errorf("drop database %s: %v", name, err)
			}
		}
	})
	return h
}

func (h *harness) Driver() cursor.Driver { return h.drv }

const claimSQL = `SELECT id, payload, attempts + 1 AS attempts{% if workload.echo %}, %(__worker_slot_id)s AS slot, %(__worker_slot_index)s AS slot_index, {{ __frame_max_rows }} AS frame_max{% endif %}
  FROM q
 WHERE status = 'pending'{% if workload.lease_us %}
    OR (status = 'claimed' AND claimed_at < NOW(6) - INTERVAL {{ workload.lease_us }} MICROSECOND){% endif %}
 ORDER BY id
 LIMIT {{ __frame_max_rows | default(1) | int }}
   FOR UPDATE SKIP LOCKED`

const markSQL = `UPDATE q SET status = 'claimed', attempts = attempts + 1, claimed_at = NOW(6) WHERE id IN ({{ keys | join(', ') }})`

// newDatabase creates a database holding table q with n pending rows and
// returns its name and a credential for it.
func (h *harness) newDatabase(t testing.TB, n int) (string, string) {
	t.Helper()
	name := fmt.Sprintf("%s_%d", h.prefix, h.seq.Add(1))
	h.mu.Lock()
	h.dbs = append(h.dbs, name)
	h.mu.Unlock()
	ctx := context.Background()
	_, err := h.admin.ExecContext(ctx, `CREATE DATABASE `+name+`;
		CREATE TABLE `+name+`.q (
			id bigint PRIMARY KEY,
			payload json NOT NULL,
			status varchar(16) NOT NULL DEFAULT 'pending',
			attempts int NOT NULL DEFAULT 0,
			claimed_at datetime(6) NULL,
			KEY status_id (status, id))`)
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	// Multi-row INSERTs rather than MariaDB's seq_1_to_N, so the test
	// also runs against MySQL.
	for start := 1; start <= n; start += 1000 {
		vals := make([]string, 0, 1000)
		for id := start; id < start+1000 && id <= n; id++ {
			vals = append(vals, fmt.Sprintf("(%d, JSON_OBJECT('n', %d, 'name', 'item %d'))", id, id, id))
		}
		if _, err := h.admin.ExecContext(ctx, `INSERT INTO `+name+`.q (id, payload) VALUES `+strings.Join(vals, ",")); err != nil {
			t.Fatalf("fill queue: %v", err)
		}
	}
	cfg := h.base.Clone()
	cfg.DBName = name
	return name, cfg.FormatDSN()
}

func (h *harness) NewQueue(t *testing.T, n int, opts cursortest.QueueOptions) (cursor.Spec, []string) {
	t.Helper()
	name, cred := h.newDatabase(t, n)
	claim, err := dsl.CompileTemplate(claimSQL, dsl.Pos{})
	if err != nil {
		t.Fatalf("compile claim: %v", err)
	}
	options := drivertest.StatusOptions("q", opts.MaxAttempts)
	options["mark"] = markSQL
	spec := cursor.Spec{
		Kind:       "mysql",
		Auth:       "mysql_test",
		Credential: cred,
		Claim:      claim,
		Scope: map[string]any{"workload": map[string]any{
			"db":       name,
			"lease_us": opts.Lease.Microseconds(),
			"echo":     opts.EchoTemplateVars,
		}},
		Options:     options,
		Lease:       opts.Lease,
		MaxAttempts: opts.MaxAttempts,
	}
	return spec, drivertest.SeqKeys(n)
}

func dbOf(spec cursor.Spec) string {
	return spec.Scope["workload"].(map[string]any)["db"].(string)
}

func (h *harness) Complete(ctx context.Context, spec cursor.Spec, rows []cursor.Row) error {
	if len(rows) == 0 {
		return nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		if _, err := strconv.ParseInt(r.Key, 10, 64); err != nil {
			return fmt.Errorf("key %q: %w", r.Key, err)
		}
		ids[i] = r.Key
	}
	_, err := h.admin.ExecContext(ctx, `UPDATE `+dbOf(spec)+`.q SET status = 'done' WHERE id IN (`+strings.Join(ids, ",")+`)`)
	return err
}

func (h *harness) DeadLettered(t *testing.T, spec cursor.Spec) []string {
	t.Helper()
	rows, err := h.admin.Query(`SELECT CAST(id AS CHAR) FROM ` + dbOf(spec) + `.q WHERE status = 'dead' ORDER BY id`)
	return drivertest.Strings(t, rows, err)
}

// DropConnections kills every connection whose current database is the
// queue's and waits until the server has reaped them.
func (h *harness) DropConnections(t *testing.T, spec cursor.Spec) {
	t.Helper()
	name := dbOf(spec)
	ids := func() []int64 { return h.connections(t, name) }
	victims := ids()
	if len(victims) == 0 {
		t.Fatalf("no connection to database %s to kill: the driver holds no connection", name)
	}
	for _, id := range victims {
		if _, err := h.admin.Exec(fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			t.Fatalf("kill %d: %v", id, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ids()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("connections to %s still alive 10s after KILL", name)
		}
		time.Sleep(20 * time.Millisecond) // polling the server with a deadline
	}
}

// connections lists, by id, the server's connections whose current
// database is name.
func (h *harness) connections(t testing.TB, name string) []int64 {
	t.Helper()
	rows, err := h.admin.Query(`SELECT id FROM information_schema.PROCESSLIST WHERE db = ? ORDER BY id`, name)
	if err != nil {
		t.Fatalf("process list: %v", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// ClaimAndDie claims and then has the server drop the claimer's
// connections, as a process death would.
func (h *harness) ClaimAndDie(t *testing.T, spec cursor.Spec, max int) []string {
	return cursortest.ClaimAndDropConnections(t, h, spec, max)
}
