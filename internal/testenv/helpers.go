package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// unavailable skips the test, or fails it under CI=true, where every
// prerequisite must be present.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// PostgresSchema creates a fresh schema with a random name in the database
// of [Postgres] and returns a DSN whose search_path is that schema, so the
// test's unqualified tables land there and never collide with a parallel
// package. The schema and everything in it is dropped when the test ends.
// It skips (fails under CI=true) like [Postgres] when no DSN is configured.
func PostgresSchema(t testing.TB) string {
	t.Helper()
	base := Postgres(t)
	schema := "t_" + RandomSuffix(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("testenv: connect to %s: %v", EnvPostgres, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("testenv: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		// t.Context is already cancelled here: use a context of our own.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("testenv: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("testenv: drop schema %s: %v", schema, err)
		}
	})
	dsn, err := withSearchPath(base, schema)
	if err != nil {
		t.Fatalf("testenv: %s: %v", EnvPostgres, err)
	}
	return dsn
}

// withSearchPath adds search_path=schema to a PostgreSQL DSN in URL or
// keyword/value form. pgx sends unknown URL parameters to the server as
// run-time parameters, so every connection opened from it starts there.
func withSearchPath(dsn, schema string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// RandomSuffix returns 12 random lower-case hex characters, for table,
// schema, stream, bucket-prefix and key names that must not collide across
// parallel tests. It is a valid unquoted SQL identifier part.
func RandomSuffix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testenv: random suffix: %v", err)
	}
	return hex.EncodeToString(b[:])
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago (the
// kernel picked it for a listener that is closed again before returning).
// Another process may take it in between; prefer listening on
// "127.0.0.1:0" directly when the code under test accepts a listener.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ModuleRoot returns the directory holding the go.mod of the module under
// test, found by walking up from the working directory (go test runs each
// package in its own source directory).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("testenv: working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// EnvShared names the directory [SharedDir] returns instead of
// ModuleRoot/../shared, for a work tree kept away from the repository
// (a git worktree elsewhere).
const EnvShared = "CURSORFLOW_TEST_SHARED"

// SharedDir returns ModuleRoot/../shared (or $CURSORFLOW_TEST_SHARED when
// set), the directory next to the repository that holds the reference NoETL
// playbooks and fixtures. The test skips when it is absent, and fails under
// CI=true.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(EnvShared)
	if dir == "" {
		dir = filepath.Join(filepath.Dir(ModuleRoot(t)), "shared")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		unavailable(t, "testenv: shared fixtures directory %s is not present", dir)
	}
	return dir
}

// WithAppName returns the PostgreSQL DSN dsn (a URL or key=value pairs)
// with application_name app, so that a test can end exactly the
// connections made with it (pg_terminate_backend).
func WithAppName(dsn, app string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			q := u.Query()
			q.Set("application_name", app)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " application_name=" + app
}

// Binary returns the path of the program name on PATH (a server a test
// starts and stops itself, such as nats-server). It skips the test (fails
// it under CI=true, where scripts/testenv installs every prerequisite)
// when there is none.
func Binary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		unavailable(t, "%s is not installed (scripts/testenv installs it): %v", name, err)
	}
	return p
}
