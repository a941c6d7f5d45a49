package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestIdleTimeoutRefusedClaimsAsBefore: a server without the idle
// transaction timeout (MySQL) refuses the SET a claim sends in front of
// its statements (error 1193, unknown system variable), before the rest
// of the batch runs. Each claim form must then still claim its rows and,
// with a mark, mark them, in its transaction; the pool must stop sending
// the SET. MariaDB has the variables, so the refusal is brought about
// with a SET that names one it lacks, refused as MySQL refuses ours.
func TestIdleTimeoutRefusedClaimsAsBefore(t *testing.T) {
	cfg, err := gomysql.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("idlefallback_%08x", rand.Uint32())
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP DATABASE "+name) })
	cfg.DBName = name
	d := New(Config{})
	const refused = "SET SESSION idle_transaction_timeout_not_here = 1; "
	claimSQL := "SELECT id FROM q WHERE status = 'pending' ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED"
	for _, tc := range []struct {
		name  string
		claim string
		args  []any
		mark  bool
	}{
		{"plain claim with mark", claimSQL, nil, true},
		{"bound params with mark", "SELECT id FROM q WHERE status = ? ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED", []any{"pending"}, true},
		{"bound params without mark", "SELECT id FROM q WHERE status = ? ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED", []any{"pending"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := admin.ExecContext(ctx, "DROP TABLE IF EXISTS "+name+".q"); err != nil {
				t.Fatal(err)
			}
			if _, err := admin.ExecContext(ctx, "CREATE TABLE "+name+".q (id int PRIMARY KEY, status varchar(16) NOT NULL DEFAULT 'pending')"); err != nil {
				t.Fatal(err)
			}
			if _, err := admin.ExecContext(ctx, "INSERT INTO "+name+".q (id) VALUES (1), (2), (3)"); err != nil {
				t.Fatal(err)
			}
			p, err := d.openPool(cfg.FormatDSN()) // a pool of its own, that knows nothing yet
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.db.Close() })
			e := &executor{db: p.db, pool: p, log: d.log, key: []string{"id"}, idle: refused}
			if tc.mark {
				if e.mark, err = compileMark("UPDATE q SET status = 'claimed' WHERE id IN ({{ keys | join(',') }})"); err != nil {
					t.Fatal(err)
				}
			}
			tx, res, err := e.Claim(ctx, tc.claim, tc.args)
			if err != nil {
				t.Fatalf("claim on a server that refuses the timeout: %v", err)
			}
			if len(res.Rows) != 2 {
				t.Fatalf("claimed %d rows, want 2", len(res.Rows))
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			var claimed int
			if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM "+name+".q WHERE status = 'claimed'").Scan(&claimed); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 2, false: 0}[tc.mark]; claimed != want {
				t.Fatalf("%d rows marked claimed, want %d", claimed, want)
			}
			if !p.noIdleTimeout.Load() || e.idleTimeout() != "" {
				t.Fatal("the pool still sends the refused timeout")
			}
		})
	}
}
