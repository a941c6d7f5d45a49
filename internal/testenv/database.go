package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresDatabase creates a database of its own, named prefix and a random
// suffix, in the server of [Postgres], and returns its DSN: for a flow whose
// tables have fixed names in public, so that runs side by side never meet.
// The database is dropped (its connections ended) when the test ends. It
// skips (fails under CI=true) like [Postgres] when no DSN is configured.
func PostgresDatabase(t testing.TB, prefix string) string {
	t.Helper()
	base := Postgres(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("testenv: %s is not a URL: %v", EnvPostgres, err)
	}
	name := fmt.Sprintf("%s_%s", prefix, RandomSuffix(t))
	Exec(t, base, "CREATE DATABASE "+name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	u.Path = "/" + name
	return u.String()
}

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// CLI builds the cursorflow CLI (examples/cursorflow) once per test binary
// and returns the path of the executable, which outlives the test binary in
// a temporary directory. Without a go toolchain on PATH it skips (fails
// under CI=true) unless CURSORFLOW_TEST_GO_TOOLCHAIN says where one is.
func CLI(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		Require(t, "CURSORFLOW_TEST_GO_TOOLCHAIN")
	}
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cursorflow-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "cursorflow")
		out, err := exec.Command("go", "build", "-o", cliPath, "github.com/cursorflow/cursorflow/examples/cursorflow").CombinedOutput()
		if err != nil {
			cliErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

// Summary is the JSON summary that `cursorflow run --json` (and resume)
// ends with.
type Summary struct {
	ExecutionID string            `json:"execution_id"`
	Status      string            `json:"status"`
	Steps       map[string]string `json:"steps"`
	Events      int64             `json:"events"`
	Seconds     float64           `json:"seconds"`
	Error       string            `json:"error"`
	FailedStep  string            `json:"failed_step"`
	FailedField string            `json:"failed_field"`
	EventLog    string            `json:"eventlog"`
}

// ParseSummary returns the last JSON summary line of the CLI's output, or
// fails the test when there is none.
func ParseSummary(t testing.TB, out []byte) Summary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var s Summary
		if strings.HasPrefix(lines[i], "{") && json.Unmarshal([]byte(lines[i]), &s) == nil {
			return s
		}
	}
	t.Fatalf("no JSON summary in the CLI's output:\n%s", out)
	return Summary{}
}

// QueryRow runs the one-row query q against the PostgreSQL database dsn
// and scans the row into dest, failing the test on any error.
func QueryRow(t testing.TB, dsn, q string, dest ...any) {
	t.Helper()
	onConn(t, dsn, q, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, q).Scan(dest...)
	})
}

// Exec runs the statements sql against the PostgreSQL database dsn,
// failing the test on any error: for the tables a test's flow expects to
// find.
func Exec(t testing.TB, dsn, sql string) {
	t.Helper()
	onConn(t, dsn, sql, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sql)
		return err
	})
}

// onConn runs f on a connection of its own to dsn, within 30 seconds, and
// fails the test, naming sql, when it returns an error.
func onConn(t testing.TB, dsn, sql string, f func(context.Context, *pgx.Conn) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer conn.Close(ctx)
	if err := f(ctx, conn); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
