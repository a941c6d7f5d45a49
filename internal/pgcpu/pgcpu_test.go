package pgcpu_test

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/internal/pgcpu"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestServerCPUGrows: a query that keeps the server busy shows in its CPU
// time, and the zero Server measures nothing.
func TestServerCPUGrows(t *testing.T) {
	if _, ok := (pgcpu.Server{}).CPU(); ok {
		t.Fatal("the zero Server measured something")
	}
	pool, err := pgxpool.New(t.Context(), testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	srv, err := pgcpu.Of(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Postmaster() == 0 {
		t.Skip("pgcpu: the test PostgreSQL server is not a process on this machine; nothing to measure")
	}
	before, ok := srv.CPU()
	if !ok {
		t.Fatal("CPU of a local server: not measured")
	}
	// About a second of server CPU on a small machine; /proc counts in
	// 10 ms ticks.
	if _, err := pool.Exec(t.Context(), "SELECT count(*) FROM generate_series(1, 5000000)"); err != nil {
		t.Fatal(err)
	}
	after, ok := srv.CPU()
	if !ok {
		t.Fatal("CPU of a local server: not measured")
	}
	if after-before < 50_000_000 { // 50 ms
		t.Fatalf("server CPU grew by %v over a query counting 5,000,000 rows, want at least 50ms", after-before)
	}
}

// TestBackendCPUGrows: a session's busy query shows in its backend's CPU
// time; a pid that is no postgres process measures nothing.
func TestBackendCPUGrows(t *testing.T) {
	if _, ok := pgcpu.Backend(os.Getpid()); ok {
		t.Fatal("the test process measured as a backend")
	}
	conn, err := pgx.Connect(t.Context(), testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	pid := int(conn.PgConn().PID())
	before, ok := pgcpu.Backend(pid)
	if !ok {
		t.Skip("pgcpu: the test PostgreSQL server is not a process on this machine; nothing to measure")
	}
	if _, err := conn.Exec(t.Context(), "SELECT count(*) FROM generate_series(1, 5000000)"); err != nil {
		t.Fatal(err)
	}
	after, ok := pgcpu.Backend(pid)
	if !ok {
		t.Fatal("CPU of a local backend: not measured")
	}
	if after-before < 50_000_000 { // 50 ms
		t.Fatalf("the backend's CPU grew by %v over a query counting 5,000,000 rows, want at least 50ms", after-before)
	}
}
