package eventlogurl_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/eventlogurl"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// roundTrip appends one event and reads it back.
func roundTrip(t *testing.T, l eventlog.Log) {
	t.Helper()
	ctx := t.Context()
	if _, err := l.Append(ctx, []eventlog.Event{{ExecutionID: "e1", Type: eventlog.TypeExecutionStarted}}); err != nil {
		t.Fatal(err)
	}
	evs, err := l.Read(ctx, "e1", 0, 0)
	if err != nil || len(evs) != 1 || evs[0].Seq != 1 {
		t.Fatalf("Read = %+v, %v", evs, err)
	}
}

func TestOpenMemory(t *testing.T) {
	t.Parallel()
	l, err := eventlogurl.Open(t.Context(), "memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, ok := l.(*eventlog.Memory); !ok {
		t.Fatalf("memory: opened a %T", l)
	}
	roundTrip(t, l)
}

func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"sqlite:", "sqlite://"} {
		path := filepath.Join(t.TempDir(), "events.db")
		l, err := eventlogurl.Open(t.Context(), prefix+path)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := l.(*sqlite.Log); !ok {
			t.Fatalf("%s opened a %T", prefix, l)
		}
		roundTrip(t, l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "eventlogurl_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer pool.Close()
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// The other parameters reach the driver as written: a space as %20
	// (which a re-encoded query would turn into +) included.
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += "options=-c%20statement_timeout%3D4321&" + eventlogurl.SchemaParam + "=" + schema
	// A reader's open finds no log in the schema, and creates none.
	if _, err := eventlogurl.OpenExisting(t.Context(), u.String()); !errors.Is(err, eventlog.ErrNoLog) {
		t.Fatalf("OpenExisting before the log exists: %v, want ErrNoLog", err)
	}
	l, err := eventlogurl.Open(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pl, ok := l.(*postgres.Log)
	if !ok {
		t.Fatalf("postgres URL opened a %T", l)
	}
	var timeout string
	if err := pl.Pool().QueryRow(t.Context(), "SHOW statement_timeout").Scan(&timeout); err != nil || timeout != "4321ms" {
		t.Fatalf("statement_timeout through the log's pool = %q, %v; want the URL's 4321ms", timeout, err)
	}
	roundTrip(t, l)
	existing, err := eventlogurl.OpenExisting(t.Context(), u.String())
	if err != nil {
		t.Fatalf("OpenExisting once the log exists: %v", err)
	}
	_ = existing.Close()
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{schema}.Sanitize()+".events").Scan(&n); err != nil || n != 1 {
		t.Fatalf("events in schema %s = %d, %v; want 1", schema, n, err)
	}
}

func TestOpenUnsupported(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"", "nope", "mysql://root@localhost/x", "sqlite:", "redis://u:secret@host/0"} {
		l, err := eventlogurl.Open(t.Context(), raw)
		if err == nil {
			_ = l.Close()
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		if !errors.Is(err, eventlogurl.ErrUnsupportedURL) {
			t.Errorf("Open(%q) = %v, want ErrUnsupportedURL", raw, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error leaks the password: %v", raw, err)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:secret@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db":                             "postgres://u@h/db",
		"sqlite:/var/lib/cf/events.db":                  "sqlite:/var/lib/cf/events.db",
		"memory:":                                       "memory:",
	} {
		if got := eventlogurl.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOpenExistingSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "typo.db")
	if _, err := eventlogurl.OpenExisting(t.Context(), "sqlite:"+path); !errors.Is(err, eventlog.ErrNoLog) {
		t.Fatalf("OpenExisting of a missing file: %v, want ErrNoLog", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("OpenExisting created %s", path)
	}
}
