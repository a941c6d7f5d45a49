package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/dsl"
)

func TestDSN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		credential, want, wantErr string
	}{
		{credential: "/var/q.db", want: "file:/var/q.db?_busy_timeout=5000&_journal_mode=WAL&_txlock=immediate"},
		{credential: "sqlite:/var/q.db", want: "file:/var/q.db?_busy_timeout=5000&_journal_mode=WAL&_txlock=immediate"},
		{credential: "sqlite:///var/q.db", want: "file:/var/q.db?_busy_timeout=5000&_journal_mode=WAL&_txlock=immediate"},
		{credential: "sqlite3://rel/q.db", want: "file:rel/q.db?_busy_timeout=5000&_journal_mode=WAL&_txlock=immediate"},
		{credential: "/tmp/a?b#c%d.db", want: "file:/tmp/a%3fb%23c%25d.db?_busy_timeout=5000&_journal_mode=WAL&_txlock=immediate"},
		{credential: "file:/var/q.db?_busy_timeout=100&mode=rwc", want: "file:/var/q.db?_busy_timeout=100&_journal_mode=WAL&_txlock=immediate&mode=rwc"},
		{credential: "file::memory:", want: "file::memory:?_busy_timeout=5000&_txlock=immediate"},
		{credential: ":memory:", want: "file::memory:?_busy_timeout=5000&_txlock=immediate"},
		{credential: "", wantErr: "empty credential"},
		{credential: "sqlite:", wantErr: "no database path"},
		{credential: "file:/x.db?a=%zz", wantErr: "malformed query"},
	}
	for _, tt := range tests {
		got, err := sqlite.DSN(tt.credential, sqlite.DefaultBusyTimeout)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("DSN(%q): err = %v, want %q", tt.credential, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("DSN(%q) = %q, %v; want %q", tt.credential, got, err, tt.want)
		}
	}
}

func compile(t *testing.T, src string) *dsl.Template {
	t.Helper()
	tmpl, err := dsl.CompileTemplate(src, dsl.Pos{})
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func TestValues(t *testing.T) {
	t.Parallel()
	drv := sqlite.New(sqlite.Config{})
	t.Cleanup(func() { _ = drv.Close() })
	cur, err := drv.Open(t.Context(), cursor.Spec{Kind: "sqlite", Credential: ":memory:", Claim: compile(t,
		`SELECT 'k-1' AS job, 42 AS i, 2.5 AS f, 'x' AS s, NULL AS n, x'00ff' AS bin, x'616263' AS txt, json_object('a', 1) AS j`)})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := cursortest.ClaimCommitted(t.Context(), cur, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"job": "k-1", "i": int64(42), "f": 2.5, "s": "x", "n": nil, "bin": "AP8=", "txt": "abc", "j": `{"a":1}`}
	if len(rows) != 1 || !reflect.DeepEqual(rows[0].Values, want) || rows[0].Key != "k-1" {
		t.Fatalf("got %+v, want key k-1 and values %v", rows, want)
	}
}

func TestErrorsNameTheAlias(t *testing.T) {
	t.Parallel()
	drv := sqlite.New(sqlite.Config{})
	t.Cleanup(func() { _ = drv.Close() })
	path := filepath.Join(t.TempDir(), "q.db")
	// A cursor's database must exist (an empty file is an empty database).
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, credential, claim, op, want string
	}{
		{"missing table", path, "UPDATE nope SET x = 1 RETURNING id", "claim", "no such table"},
		{"no result set", path, "CREATE TABLE IF NOT EXISTS t (id INTEGER)", "claim", "no result set"},
		{"bad credential", "", "SELECT 1", "open", "empty credential"},
		{"unopenable file", filepath.Join(t.TempDir(), "missing-dir", "q.db"), "SELECT 1", "open", "does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur, err := drv.Open(t.Context(), cursor.Spec{Kind: "sqlite", Auth: "local", Credential: tt.credential, Claim: compile(t, tt.claim)})
			if err == nil {
				defer cur.Close()
				_, err = cursortest.ClaimCommitted(t.Context(), cur, 1)
			}
			var ce *cursor.ClaimError
			if !errors.As(err, &ce) || ce.Op != tt.op || ce.Auth != "local" {
				t.Fatalf("err = %v, want a ClaimError for op %s with auth local", err, tt.op)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestTwoProcessesNeverShareARow runs two drivers (two connection pools,
// as two processes would have) against one file: BEGIN IMMEDIATE and the
// busy timeout must keep their claims disjoint.
func TestTwoDriversNeverShareARow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const n = 300
	table := h.createTable(t, n)
	claim := compile(t, `UPDATE `+table+` SET status = 'claimed' WHERE id IN
		(SELECT id FROM `+table+` WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }}) RETURNING id`)
	var (
		mu   sync.Mutex
		seen = make(map[string]int)
		wg   sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for p := range 2 {
		drv := sqlite.New(sqlite.Config{})
		t.Cleanup(func() { _ = drv.Close() })
		for slot := range 4 {
			cur, err := drv.Open(ctx, cursor.Spec{Kind: "sqlite", Credential: h.path, Claim: claim, SlotID: slot})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					rows, err := cursortest.ClaimCommitted(ctx, cur, 7)
					if err != nil {
						t.Errorf("driver %d slot %d: %v", p, slot, err)
						return
					}
					if len(rows) == 0 {
						return
					}
					mu.Lock()
					for _, r := range rows {
						seen[r.Key]++
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d distinct rows claimed, want %d", len(seen), n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("row %s claimed %d times", k, c)
		}
	}
}

// TestBoundParams: claim and ack with ? params, keys with quotes.
func TestBoundParams(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if _, err := h.db.ExecContext(t.Context(), `CREATE TABLE named (name TEXT PRIMARY KEY, status TEXT NOT NULL DEFAULT 'pending');
		INSERT INTO named (name) VALUES ('O''Brien'), ('back\slash'), ('$$x$$'), ('naïve')`); err != nil {
		t.Fatal(err)
	}
	cur, err := h.drv.Open(t.Context(), cursor.Spec{Kind: "sqlite", Credential: "sqlite:" + h.path, Scope: map[string]any{"wanted": "pending"},
		Claim: compile(t, `UPDATE named SET status = 'claimed' WHERE name IN (SELECT name FROM named WHERE status = ? LIMIT ?) RETURNING name`),
		Options: map[string]any{
			"key":          "name",
			"claim_params": []any{"{{ wanted }}", "{{ __frame_max_rows }}"},
			"ack":          map[string]any{"sql": `UPDATE named SET status = 'done' WHERE name IN (SELECT value FROM json_each(?))`, "params": []any{"{{ keys }}"}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	claim, err := cur.Claim(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	rows := claim.Rows
	if len(rows) != 4 {
		t.Fatalf("claimed %d rows", len(rows))
	}
	if err := claim.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := cur.Ack(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	var done int
	if err := h.db.QueryRowContext(t.Context(), `SELECT count(*) FROM named WHERE status = 'done'`).Scan(&done); err != nil || done != 4 {
		t.Fatalf("%d rows done: %v", done, err)
	}
}
