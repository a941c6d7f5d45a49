package duckdb_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/duckdb"
)

func call(cfg map[string]any) *tools.Call { return &tools.Call{Config: cfg} }

func TestFileDatabasePersistsAcrossCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tool := duckdb.New(duckdb.Config{})
	path := filepath.Join(t.TempDir(), "data.duckdb")
	out, err := tool.Execute(ctx, call(map[string]any{"database": path, "command": "CREATE TABLE t (id INT, name TEXT); INSERT INTO t VALUES (1, 'a'), (2, 'b');"}))
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("create: %v %+v", err, out)
	}
	if got := out.Data.(map[string]any)["row_count"]; got != int64(2) {
		t.Errorf("insert row_count = %#v, want 2", got)
	}
	if err := tool.Close(); err != nil {
		t.Fatal(err)
	}
	// A new tool (a new process, as far as the file knows) sees the rows.
	tool = duckdb.New(duckdb.Config{})
	defer tool.Close()
	out, err = tool.Execute(ctx, call(map[string]any{"database": path, "query": "SELECT id, name FROM t ORDER BY id"}))
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("select: %v %+v", err, out)
	}
	want := map[string]any{
		"columns":   []any{"id", "name"},
		"rows":      []any{map[string]any{"id": int64(1), "name": "a"}, map[string]any{"id": int64(2), "name": "b"}},
		"row_count": int64(2),
	}
	if !reflect.DeepEqual(out.Data, want) {
		t.Errorf("data = %#v\nwant %#v", out.Data, want)
	}
}

func TestValuesArePlain(t *testing.T) {
	t.Parallel()
	tool := duckdb.New(duckdb.Config{})
	defer tool.Close()
	out, err := tool.Execute(context.Background(), call(map[string]any{"command": `SELECT 42 AS answer, 'success' AS status,
		1.50::DECIMAL(10,2) AS price, 0.1::DECIMAL(20,19) AS tenth, DATE '2024-01-02' AS d,
		TIMESTAMP '2024-01-02 03:04:05' AS ts, [1, 2] AS list, {'x': 3} AS s,
		'00000000-0000-0000-0000-000000000001'::UUID AS u, 12345678901234567890::HUGEINT AS big, NULL AS n`}))
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("%v %+v", err, out)
	}
	row := out.Data.(map[string]any)["rows"].([]any)[0].(map[string]any)
	want := map[string]any{
		"answer": int64(42), "status": "success", "price": 1.5, "tenth": 0.1, "d": "2024-01-02",
		"ts": "2024-01-02T03:04:05", "list": []any{int64(1), int64(2)}, "s": map[string]any{"x": int64(3)},
		"u": "00000000-0000-0000-0000-000000000001", "big": "12345678901234567890", "n": nil,
	}
	for k, w := range want {
		if !reflect.DeepEqual(row[k], w) {
			t.Errorf("%s = %#v (%T), want %#v", k, row[k], row[k], w)
		}
	}
}

func TestInMemoryCallsAreIsolated(t *testing.T) {
	t.Parallel()
	tool := duckdb.New(duckdb.Config{})
	defer tool.Close()
	ctx := context.Background()
	if out, _ := tool.Execute(ctx, call(map[string]any{"command": "CREATE TABLE only_here (x INT)"})); out.Status != tools.StatusSuccess {
		t.Fatalf("create: %+v", out)
	}
	out, err := tool.Execute(ctx, call(map[string]any{"command": "SELECT * FROM only_here"}))
	if err != nil || out.Status != tools.StatusError || !strings.Contains(out.Error, "only_here") {
		t.Fatalf("second call saw the first call's in-memory table: %v %+v", err, out)
	}
	if out.Data.(map[string]any)["retryable"] != false {
		t.Errorf("data = %#v, want retryable false", out.Data)
	}
}

func TestCredentialNamesTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kc.duckdb")
	tool := duckdb.New(duckdb.Config{})
	defer tool.Close()
	kc := tools.StaticURLs(map[string]string{"local": "duckdb://" + path})
	c := &tools.Call{Config: map[string]any{"auth": "local", "command": "CREATE TABLE k (x INT); INSERT INTO k VALUES (7); SELECT x FROM k"}, Keychain: kc}
	out, err := tool.Execute(context.Background(), c)
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("%v %+v", err, out)
	}
	if rows := out.Data.(map[string]any)["rows"].([]any); len(rows) != 1 || rows[0].(map[string]any)["x"] != int64(7) {
		t.Errorf("rows = %#v", rows)
	}
	c.Config["auth"] = "missing"
	if _, err := tool.Execute(context.Background(), c); !errors.Is(err, tools.ErrCredentialNotFound) {
		t.Errorf("unknown alias: %v, want ErrCredentialNotFound", err)
	}
}

func TestMissingCommandIsAConfigError(t *testing.T) {
	t.Parallel()
	tool := duckdb.New(duckdb.Config{})
	defer tool.Close()
	if _, err := tool.Execute(context.Background(), call(map[string]any{"database": ":memory:"})); !errors.Is(err, duckdb.ErrBadConfig) {
		t.Fatalf("err = %v, want ErrBadConfig", err)
	}
}
