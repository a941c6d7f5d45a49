package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/postgres"
	"github.com/cursorflow/cursorflow/internal/pgcpu"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// BenchmarkClaimPlan is the evidence for sending a claim as text, planned
// afresh at every frame (see the executor's Claim). Each op claims 100
// rows and commits, on one session, either through the driver (text) or
// as pgx runs the same claim by default, prepared once and its plan kept
// (prepared). It reports that session's server CPU per claim
// (server-µs/claim) where the server runs on this machine.
//
// Both queues have a partial index on their pending rows, as a queue is
// usually kept. drain: 100 rows per op, all pending when analyzed. inflow:
// 1,000 rows when analyzed, and 100 new rows (from another session)
// before every claim, as a queue fed while it drains. A prepared claim
// keeps the plan made for the table it first saw: for a table whose rows
// were all pending, scanning the primary key and filtering on the status
// costs the same as the partial index, and as the claimed rows pile up at
// the front of the key every claim walks past all of them.
func BenchmarkClaimPlan(b *testing.B) {
	for _, scenario := range []string{"drain", "inflow"} {
		for _, how := range []string{"text", "prepared"} {
			b.Run(scenario+"/"+how, func(b *testing.B) { benchClaimPlan(b, scenario, how) })
		}
	}
}

func benchClaimPlan(b *testing.B, scenario, how string) {
	ctx := context.Background()
	h := newHarness(b, postgres.Config{MaxConns: 1})
	table := h.schema + ".q"
	rows := 100 * (b.N + 1)
	index := fmt.Sprintf("CREATE INDEX ON %s (id) WHERE status = 'pending';", table)
	if scenario == "inflow" {
		rows = 1000
	}
	if _, err := h.admin.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s (id bigint PRIMARY KEY, payload text NOT NULL,
		status text NOT NULL DEFAULT 'pending', claimed_at timestamptz);
		INSERT INTO %[1]s (id, payload) SELECT g, 'payload-' || g FROM generate_series(1, %[2]d) g; %[3]s
		ANALYZE %[1]s`, table, rows, index)); err != nil {
		b.Fatal(err)
	}
	claimSQL := fmt.Sprintf(`WITH c AS (SELECT id FROM %[1]s WHERE status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 100)
		UPDATE %[1]s q SET status = 'claimed', claimed_at = now() FROM c WHERE q.id = c.id RETURNING q.id, q.payload`, table)
	app := "claimplan_" + testenv.RandomSuffix(b)
	dsn := testenv.WithAppName(h.base, app)
	var claim func() int
	switch how {
	case "text":
		cur, err := h.drv.Open(ctx, cursor.Spec{Kind: "postgres", Credential: dsn, Claim: mustTemplate(b, claimSQL)})
		if err != nil {
			b.Fatal(err)
		}
		defer cur.Close()
		claim = func() int {
			got, err := cursortest.ClaimCommitted(ctx, cur, 100)
			if err != nil {
				b.Fatal(err)
			}
			return len(got)
		}
	default:
		pc, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			b.Fatal(err)
		}
		pc.MaxConns = 1
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		claim = func() int {
			tx, err := pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
				b.Fatal(err)
			}
			rs, err := tx.Query(ctx, claimSQL)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rs.Next() {
				n++
			}
			if err := rs.Err(); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	inflow := func(op int) {
		if scenario != "inflow" {
			return
		}
		from := rows + 100*op + 1
		if _, err := h.admin.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, payload) SELECT g, 'payload-' || g FROM generate_series(%d, %d) g",
			table, from, from+99)); err != nil {
			b.Fatal(err)
		}
	}
	// The session's first claim opens it and, prepared, plans the claim.
	inflow(0)
	if n := claim(); n != 100 {
		b.Fatalf("claimed %d rows, want 100", n)
	}
	var pid int
	if err := h.admin.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	cpu0, local := pgcpu.Backend(pid)
	b.ResetTimer()
	for op := 1; op <= b.N; op++ {
		b.StopTimer()
		inflow(op)
		b.StartTimer()
		if n := claim(); n != 100 {
			b.Fatalf("op %d claimed %d rows, want 100", op, n)
		}
	}
	b.StopTimer()
	if cpu1, ok := pgcpu.Backend(pid); local && ok {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "server-µs/claim")
	}
}
