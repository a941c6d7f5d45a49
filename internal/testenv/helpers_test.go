package testenv

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestPostgresSchema(t *testing.T) {
	base := Postgres(t)
	var schema string
	t.Run("inside", func(t *testing.T) {
		dsn := PostgresSchema(t)
		ctx := t.Context()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, "select current_schema()").Scan(&schema); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(schema, "t_") {
			t.Fatalf("current_schema() = %q, want the fresh t_... schema", schema)
		}
		if _, err := conn.Exec(ctx, "create table items (id int primary key)"); err != nil {
			t.Fatal(err)
		}
		var where string
		if err := conn.QueryRow(ctx, "select table_schema from information_schema.tables where table_name = 'items' and table_schema = $1", schema).Scan(&where); err != nil {
			t.Fatalf("table items is not in schema %s: %v", schema, err)
		}
	})
	// The subtest's cleanup has run: the schema must be gone.
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "select count(*) from information_schema.schemata where schema_name = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("schema %s still exists after cleanup", schema)
	}
}

func TestWithSearchPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://u@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?search_path=s1&sslmode=disable"},
		{"postgresql://u@h/db", "postgresql://u@h/db?search_path=s1"},
		{"postgres://u@h/db?search_path=old", "postgres://u@h/db?search_path=s1"},
		{"host=h user=u dbname=db", "host=h user=u dbname=db search_path=s1"},
	}
	for _, tt := range tests {
		got, err := withSearchPath(tt.in, "s1")
		if err != nil || got != tt.want {
			t.Errorf("withSearchPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestRandomSuffix(t *testing.T) {
	a, b := RandomSuffix(t), RandomSuffix(t)
	if len(a) != 12 || a == b {
		t.Fatalf("RandomSuffix gave %q and %q", a, b)
	}
}

func TestFreePort(t *testing.T) {
	port := FreePort(t)
	if port <= 0 || port > 65535 {
		t.Fatalf("FreePort() = %d", port)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("port %d is not free: %v", port, err)
	}
	l.Close()
}

func TestModuleRoot(t *testing.T) {
	root := ModuleRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "module github.com/cursorflow/cursorflow") {
		t.Fatalf("%s/go.mod is not cursorflow's", root)
	}
}

func TestSharedDir(t *testing.T) {
	dir := SharedDir(t)
	if _, err := os.Stat(filepath.Join(dir, "pft-api.md")); err != nil {
		t.Fatalf("SharedDir() = %s without pft-api.md: %v", dir, err)
	}
}
