package clickhouse_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/clickhouse"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// harness implements cursortest.Harness on tables with a random prefix.
// Every queue reaches the server through its own TCP proxy, hence its own
// DSN and pool, so DropConnections hits one queue only.
type harness struct {
	drv    *clickhouse.Driver
	admin  driver.Conn
	base   *url.URL
	prefix string
	seq    atomic.Int64
	mu     sync.Mutex
	prox   map[string]*testenv.Proxy // credential → proxy
}

func adminConn(t testing.TB) (driver.Conn, *url.URL) {
	t.Helper()
	raw := testenv.ClickHouse(t)
	base, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.EnvClickHouse, err)
	}
	opts, err := ch.ParseDSN(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.EnvClickHouse, err)
	}
	admin, err := ch.Open(opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return admin, base
}

func newHarness(t testing.TB, cfg clickhouse.Config) *harness {
	t.Helper()
	admin, base := adminConn(t)
	h := &harness{drv: clickhouse.New(cfg), admin: admin, base: base,
		prefix: "cursortest_" + testenv.RandomSuffix(t), prox: make(map[string]*testenv.Proxy)}
	t.Cleanup(func() { _ = h.drv.Close() })
	return h
}

// createQueue makes a source table of n rows (id 1..n, payload, n) and
// drops it and its bookkeeping tables after the test.
func createQueue(t testing.TB, admin driver.Conn, table string, n int) {
	t.Helper()
	ctx := context.Background()
	stmts := []string{
		`CREATE TABLE ` + table + ` (id UInt64, payload String, n UInt64) ENGINE = MergeTree ORDER BY id`,
	}
	if n > 0 {
		stmts = append(stmts, `INSERT INTO `+table+` (id, payload, n)
			SELECT number + 1, concat('item ', toString(number + 1)), number + 1 FROM system.numbers LIMIT `+strconv.Itoa(n))
	}
	for _, s := range stmts {
		if err := admin.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	t.Cleanup(func() {
		for _, suffix := range []string{"", "_claims", "_done", "_dead"} {
			if err := admin.Exec(context.Background(), `DROP TABLE IF EXISTS `+table+suffix); err != nil {
				t.Errorf("drop %s%s: %v", table, suffix, err)
			}
		}
	})
}

func (h *harness) Driver() cursor.Driver { return h.drv }

// credential returns the server's DSN with the host pointing at a fresh
// proxy.
func (h *harness) credential(t testing.TB) string {
	p := testenv.NewProxy(t, h.base.Host)
	u := *h.base
	u.Host = p.Addr()
	h.mu.Lock()
	h.prox[u.String()] = p
	h.mu.Unlock()
	return u.String()
}

func (h *harness) NewQueue(t *testing.T, n int, opts cursortest.QueueOptions) (cursor.Spec, []string) {
	t.Helper()
	table := fmt.Sprintf("%s_q%d", h.prefix, h.seq.Add(1))
	createQueue(t, h.admin, table, n)
	lease := opts.Lease
	if lease == 0 {
		lease = time.Minute
	}
	keys := drivertest.SeqKeys(n)
	var claim *dsl.Template
	if opts.EchoTemplateVars {
		// The claim template is the source query.
		var err error
		claim, err = dsl.CompileTemplate(`SELECT id, payload, {{ __worker_slot_id }} AS slot, %(__worker_slot_index)s AS slot_index, {{ __frame_max_rows }} AS frame_max FROM `+table, dsl.Pos{})
		if err != nil {
			t.Fatal(err)
		}
	}
	return cursor.Spec{
		Kind:        "clickhouse",
		Auth:        "ch_test",
		Credential:  h.credential(t),
		Claim:       claim,
		Options:     map[string]any{"table": table},
		Lease:       lease,
		MaxAttempts: opts.MaxAttempts,
		Logger:      slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, keys
}

// Complete does nothing: Ack records the rows as done.
func (h *harness) Complete(context.Context, cursor.Spec, []cursor.Row) error { return nil }

func (h *harness) DeadLettered(t *testing.T, spec cursor.Spec) []string {
	t.Helper()
	rows, err := h.admin.Query(context.Background(), `SELECT DISTINCT key FROM `+spec.Options["table"].(string)+`_dead ORDER BY key`)
	return drivertest.Strings(t, rows, err)
}

// DropConnections closes every connection between the driver and the
// server that the queue's proxy carries.
func (h *harness) DropConnections(t *testing.T, spec cursor.Spec) {
	t.Helper()
	h.mu.Lock()
	p := h.prox[spec.Credential]
	h.mu.Unlock()
	if n := p.DropConnections(); n == 0 {
		t.Fatal("the driver holds no connection to the server")
	}
	p.WaitClosed(t, 10*time.Second)
}

// ClaimAndDie claims and then has the server drop the claimer's
// connections, as a process death would.
func (h *harness) ClaimAndDie(t *testing.T, spec cursor.Spec, max int) []string {
	return cursortest.ClaimAndDropConnections(t, h, spec, max)
}
