package postgres_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/postgres"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// harness implements cursortest.Harness on tables of a private schema.
// Every queue gets its own application_name in its credential, so the
// driver keeps a pool per queue and DropConnections hits one queue only.
type harness struct {
	drv    *postgres.Driver
	admin  *pgxpool.Pool
	base   string
	schema string
	seq    atomic.Int64
}

func newHarness(t testing.TB, cfg postgres.Config) *harness {
	t.Helper()
	base := testenv.Postgres(t)
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	h := &harness{drv: postgres.New(cfg), admin: admin, base: base, schema: "cursortest_" + testenv.RandomSuffix(t)}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+h.schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		_ = h.drv.Close()
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+h.schema+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
		admin.Close()
	})
	return h
}

func (h *harness) Driver() cursor.Driver { return h.drv }

const claimSQL = `WITH candidate AS (
  SELECT id FROM {{ workload.table }}
  WHERE status = 'pending'{% if workload.lease_ms %}
     OR (status = 'claimed' AND claimed_at < clock_timestamp() - interval '{{ workload.lease_ms }} milliseconds'){% endif %}
  ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows | default(1) | int }})
UPDATE {{ workload.table }} j
   SET status = 'claimed', attempts = j.attempts + 1, claimed_at = clock_timestamp()
  FROM candidate c WHERE j.id = c.id
RETURNING j.id, j.payload, j.attempts{% if workload.echo %}, %(__worker_slot_id)s AS slot, %(__worker_slot_index)s AS slot_index, {{ __frame_max_rows }} AS frame_max{% endif %}`

// queue is one table: the spec's scope carries its name.
func (h *harness) createTable(t testing.TB, n int) string {
	t.Helper()
	table := fmt.Sprintf("%s.q%d", h.schema, h.seq.Add(1))
	ctx := context.Background()
	_, err := h.admin.Exec(ctx, `CREATE TABLE `+table+` (
		id bigint PRIMARY KEY,
		payload jsonb NOT NULL,
		status text NOT NULL DEFAULT 'pending',
		attempts int NOT NULL DEFAULT 0,
		claimed_at timestamptz);
		CREATE INDEX ON `+table+` (id) WHERE status = 'pending'`)
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	if n > 0 {
		_, err = h.admin.Exec(ctx, `INSERT INTO `+table+` (id, payload)
			SELECT g, jsonb_build_object('n', g, 'name', 'item ' || g) FROM generate_series(1, $1::int) g`, n)
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
		Kind:       "postgres",
		Auth:       "pg_test",
		Credential: testenv.WithAppName(h.base, strings.ReplaceAll(table, ".", "_")),
		Claim:      claimSQL,
		Table:      table,
	}.Spec(t, opts)
	return spec, drivertest.SeqKeys(n)
}

func ids(rows []cursor.Row) ([]int64, error) {
	out := make([]int64, len(rows))
	for i, r := range rows {
		n, err := strconv.ParseInt(r.Key, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", r.Key, err)
		}
		out[i] = n
	}
	return out, nil
}

func (h *harness) Complete(ctx context.Context, spec cursor.Spec, rows []cursor.Row) error {
	id, err := ids(rows)
	if err != nil {
		return err
	}
	_, err = h.admin.Exec(ctx, `UPDATE `+drivertest.TableOf(spec)+` SET status = 'done' WHERE id = ANY($1)`, id)
	return err
}

func (h *harness) DeadLettered(t *testing.T, spec cursor.Spec) []string {
	t.Helper()
	rows, err := h.admin.Query(context.Background(), `SELECT id::text FROM `+drivertest.TableOf(spec)+` WHERE status = 'dead' ORDER BY id`)
	return drivertest.Strings(t, rows, err)
}

// DropConnections terminates the backends of spec's application_name
// and waits until the server has reaped them.
func (h *harness) DropConnections(t *testing.T, spec cursor.Spec) {
	t.Helper()
	app := strings.ReplaceAll(drivertest.TableOf(spec), ".", "_")
	ctx := context.Background()
	var killed int
	err := h.admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&killed)
	if err != nil {
		t.Fatalf("terminate backends: %v", err)
	}
	if killed == 0 {
		t.Fatalf("no backend with application_name %s to terminate: the driver holds no connection", app)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left int
		if err := h.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&left); err != nil {
			t.Fatalf("count backends: %v", err)
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends of %s still alive 10s after pg_terminate_backend", left, app)
		}
		time.Sleep(20 * time.Millisecond) // polling the server with a deadline
	}
}

// ClaimAndDie claims and then has the server drop the claimer's
// connections, as a process death would.
func (h *harness) ClaimAndDie(t *testing.T, spec cursor.Spec, max int) []string {
	return cursortest.ClaimAndDropConnections(t, h, spec, max)
}
