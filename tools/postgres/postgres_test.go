package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/internal/pgretry"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/postgres"
)

// setup returns a tool, a keychain with alias "pg" and a fresh schema
// that is dropped when the test ends.
func setup(t testing.TB) (*postgres.Tool, tools.Keychain, string) {
	t.Helper()
	dsn := testenv.Postgres(t)
	ctx := context.Background()
	schema := fmt.Sprintf("tools_pg_%08x", rand.Uint32())
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close(context.Background())
	})
	tool := postgres.New(postgres.Config{})
	t.Cleanup(func() { tool.Close() })
	return tool, tools.StaticURLs(map[string]string{"pg": dsn}), schema
}

func exec(t testing.TB, tool *postgres.Tool, kc tools.Keychain, key, sql string) tools.Output {
	t.Helper()
	out, err := tool.Execute(context.Background(), &tools.Call{Kind: "postgres", Keychain: kc, Config: map[string]any{"auth": "pg", key: sql}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	return out
}

func TestExecute(t *testing.T) {
	t.Parallel()
	tool, kc, s := setup(t)
	exec(t, tool, kc, "command", fmt.Sprintf(`CREATE TABLE %[1]s.item (id int PRIMARY KEY, name text, n int NOT NULL DEFAULT 0)`, s))

	tests := []struct {
		name   string
		key    string
		sql    string
		status string
		want   map[string]any
		errHas []string
	}{
		{
			name: "comment with apostrophe then more statements; last rows win",
			key:  "command",
			sql: fmt.Sprintf(`-- don't split me
INSERT INTO %[1]s.item (id, name) VALUES (1, 'a;b'), (2, 'it''s');
SELECT id, name FROM %[1]s.item WHERE id = 1; /* ; it's */
SELECT id, name FROM %[1]s.item ORDER BY id;
UPDATE %[1]s.item SET n = n + 1;`, s),
			status: tools.StatusSuccess,
			want: map[string]any{
				"columns":   []any{"id", "name"},
				"rows":      []any{map[string]any{"id": int64(1), "name": "a;b"}, map[string]any{"id": int64(2), "name": "it's"}},
				"row_count": int64(2),
			},
		},
		{
			name:   "no statement returns rows: row_count is rows affected",
			key:    "query",
			sql:    fmt.Sprintf(`UPDATE %[1]s.item SET n = n + 1; UPDATE %[1]s.item SET n = n + 1 WHERE id = 2`, s),
			status: tools.StatusSuccess,
			want:   map[string]any{"columns": []any{}, "rows": []any{}, "row_count": int64(1)},
		},
		{
			name:   "empty select keeps its columns",
			key:    "sql",
			sql:    fmt.Sprintf(`SELECT id FROM %[1]s.item WHERE false`, s),
			status: tools.StatusSuccess,
			want:   map[string]any{"columns": []any{"id"}, "rows": []any{}, "row_count": int64(0)},
		},
		{
			name:   "returning",
			key:    "command",
			sql:    fmt.Sprintf(`UPDATE %[1]s.item SET n = n + 10 WHERE id = 1 RETURNING n`, s),
			status: tools.StatusSuccess,
			want:   map[string]any{"columns": []any{"n"}, "rows": []any{map[string]any{"n": int64(12)}}, "row_count": int64(1)},
		},
		{
			name:   "raise exception in DO block",
			key:    "command",
			sql:    `DO $$ BEGIN RAISE EXCEPTION 'custom boom %', 42; END $$;`,
			status: tools.StatusError,
			errHas: []string{"ERROR: custom boom 42", "SQLSTATE P0001"},
		},
		{
			name:   "error rolls back the implicit transaction",
			key:    "command",
			sql:    fmt.Sprintf(`INSERT INTO %[1]s.item (id) VALUES (3); INSERT INTO %[1]s.item (id) VALUES (1);`, s),
			status: tools.StatusError,
			errHas: []string{"duplicate key", "SQLSTATE 23505"},
		},
		{
			name:   "syntax error",
			key:    "command",
			sql:    `SELEC 1`,
			status: tools.StatusError,
			errHas: []string{"syntax error", "SQLSTATE 42601"},
		},
	}
	// Subtests run in order: later cases depend on the rows earlier ones wrote.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := exec(t, tool, kc, tt.key, tt.sql)
			if out.Status != tt.status {
				t.Fatalf("status %q (error %q), want %q", out.Status, out.Error, tt.status)
			}
			if tt.want != nil && !reflect.DeepEqual(out.Data, tt.want) {
				t.Errorf("data\n got %#v\nwant %#v", out.Data, tt.want)
			}
			for _, s := range tt.errHas {
				if !strings.Contains(out.Error, s) {
					t.Errorf("error %q lacks %q", out.Error, s)
				}
			}
		})
	}
	out := exec(t, tool, kc, "command", fmt.Sprintf(`SELECT count(*) AS c FROM %s.item WHERE id = 3`, s))
	if got := out.Data.(map[string]any)["rows"].([]any)[0].(map[string]any)["c"]; got != int64(0) {
		t.Errorf("row 3 survived the failed command: count %v", got)
	}
}

func TestDecodeTypes(t *testing.T) {
	t.Parallel()
	tool, kc, _ := setup(t)
	out := exec(t, tool, kc, "command", `SET TIME ZONE 'UTC';
SELECT 1::int2 AS i2, 2::int4 AS i4, 9007199254740993::int8 AS i8,
  true AS b, 'txt'::text AS t, 'c'::char(3) AS ch,
  12.50::numeric(10,2) AS num, 123456789012345678901234567890.5::numeric AS bignum, 7::numeric AS numint,
  1.5::float8 AS f8, 'NaN'::float8 AS nan,
  '{"a": [1, 2.5, null], "b": "x"}'::jsonb AS jb, '[1,"two"]'::json AS js,
  ARRAY[1,2,NULL]::int[] AS ia, ARRAY['a b','q"t',NULL,'NULL']::text[] AS ta, '{{1,2},{3,4}}'::int[] AS ia2,
  ARRAY['{"k":1}'::jsonb] AS jba,
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS u,
  '2024-01-02 03:04:05.123456+00'::timestamptz AS tstz, '2024-01-02 03:04:05'::timestamp AS ts, '2024-01-02'::date AS d,
  NULL::text AS nul, '\x0102'::bytea AS by, '1 day'::interval AS iv`)
	if out.Status != tools.StatusSuccess {
		t.Fatalf("status %s: %s", out.Status, out.Error)
	}
	row := out.Data.(map[string]any)["rows"].([]any)[0].(map[string]any)
	want := map[string]any{
		"i2": int64(1), "i4": int64(2), "i8": int64(9007199254740993),
		"b": true, "t": "txt", "ch": "c  ",
		"num": 12.5, "bignum": "123456789012345678901234567890.5", "numint": int64(7),
		"f8": 1.5, "nan": "NaN",
		"jb": map[string]any{"a": []any{int64(1), 2.5, nil}, "b": "x"}, "js": []any{int64(1), "two"},
		"ia": []any{int64(1), int64(2), nil}, "ta": []any{"a b", `q"t`, nil, "NULL"},
		"ia2":  []any{[]any{int64(1), int64(2)}, []any{int64(3), int64(4)}},
		"jba":  []any{map[string]any{"k": int64(1)}},
		"u":    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
		"tstz": "2024-01-02T03:04:05.123456Z", "ts": "2024-01-02T03:04:05", "d": "2024-01-02",
		"nul": nil, "by": `\x0102`, "iv": "1 day",
	}
	for k, w := range want {
		if got := row[k]; !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %#v, want %#v", k, got, w)
		}
	}
	if len(row) != len(want) {
		t.Errorf("row has %d columns, want %d", len(row), len(want))
	}
}

func TestCredentialErrors(t *testing.T) {
	t.Parallel()
	tool := postgres.New(postgres.Config{})
	t.Cleanup(func() { tool.Close() })
	kc := tools.StaticURLs(map[string]string{
		"down": "postgres://app:hunter2secret@127.0.0.1:1/test?sslmode=disable&connect_timeout=2",
		"junk": "postgres://app:hunter2secret@[::1/x?sslmode=bogus",
	})
	call := func(cfg map[string]any) (tools.Output, error) {
		return tool.Execute(context.Background(), &tools.Call{Keychain: kc, Config: cfg})
	}

	out, err := call(map[string]any{"auth": "down", "command": "SELECT 1"})
	if err != nil {
		t.Fatalf("unreachable server must be an error Output, got %v", err)
	}
	if out.Status != tools.StatusError || !strings.Contains(out.Error, `"down"`) || strings.Contains(out.Error, "hunter2secret") {
		t.Errorf("unreachable: %+v", out)
	}
	if out.Data.(map[string]any)["retryable"] != true {
		t.Errorf("unreachable should be retryable: %v", out.Data)
	}

	_, err = call(map[string]any{"credential": "junk", "command": "SELECT 1"})
	if err == nil || !strings.Contains(err.Error(), `"junk"`) || strings.Contains(err.Error(), "hunter2secret") {
		t.Errorf("invalid URL error %v", err)
	}

	_, err = call(map[string]any{"auth": "missing", "command": "SELECT 1"})
	if !errors.Is(err, tools.ErrCredentialNotFound) || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("unknown alias error %v", err)
	}
	_, err = call(map[string]any{"auth": "down"})
	if !errors.Is(err, postgres.ErrBadConfig) {
		t.Errorf("missing command error %v", err)
	}
	_, err = call(map[string]any{"command": "SELECT 1"})
	if !errors.Is(err, postgres.ErrBadConfig) {
		t.Errorf("missing auth error %v", err)
	}
}

func TestConcurrentCallsAndClose(t *testing.T) {
	t.Parallel()
	tool, kc, s := setup(t)
	exec(t, tool, kc, "command", fmt.Sprintf(`CREATE TABLE %[1]s.c (id int PRIMARY KEY, n int NOT NULL); INSERT INTO %[1]s.c VALUES (1, 0)`, s))
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan string, workers*each)
	for range workers {
		wg.Go(func() {
			for range each {
				out, err := tool.Execute(context.Background(), &tools.Call{Keychain: kc, Config: map[string]any{
					"auth":    map[string]any{"type": "postgres", "credential": "pg"}, // NoETL's object form
					"command": fmt.Sprintf(`UPDATE %s.c SET n = n + 1 WHERE id = 1`, s),
				}})
				if err != nil || out.Status != tools.StatusSuccess {
					errs <- fmt.Sprint(err, out.Error)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	out := exec(t, tool, kc, "command", fmt.Sprintf(`SELECT n FROM %s.c`, s))
	if got := out.Data.(map[string]any)["rows"].([]any)[0].(map[string]any)["n"]; got != int64(workers*each) {
		t.Errorf("n = %v, want %d", got, workers*each)
	}
	tool.Close()
	if _, err := tool.Execute(context.Background(), &tools.Call{Keychain: kc, Config: map[string]any{"auth": "pg", "command": "SELECT 1"}}); !errors.Is(err, postgres.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// BenchmarkUpdateByID measures the per-row hot path of a cursor loop: one
// trivial UPDATE by primary key per call.
func BenchmarkUpdateByID(b *testing.B) {
	tool, kc, s := setup(b)
	exec(b, tool, kc, "command", fmt.Sprintf(`CREATE TABLE %[1]s.b (id int PRIMARY KEY, n int NOT NULL);
INSERT INTO %[1]s.b SELECT g, 0 FROM generate_series(1, 1000) g`, s))
	run := func(b *testing.B, i int) {
		out, err := tool.Execute(context.Background(), &tools.Call{Keychain: kc, Config: map[string]any{
			"auth": "pg", "command": fmt.Sprintf(`UPDATE %s.b SET n = n + 1 WHERE id = %d`, s, i%1000+1),
		}})
		if err != nil || out.Status != tools.StatusSuccess {
			b.Fatal(err, out.Error)
		}
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			run(b, i)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(1000)
			for pb.Next() {
				i++
				run(b, i)
			}
		})
	})
}

// nasty are values that break SQL spliced by hand: quotes, backslashes,
// dollar quotes, a comment, non-ASCII text.
var nasty = []any{"O'Brien", `C:\temp\'x`, `\'); DROP TABLE x; --`, "$$ $tag$ $$", "naïve — 日本 🚀", "", `"quoted"`, "a\nb\tc"}

// TestSQLSafeValues sends nasty values to PostgreSQL both ways the
// documentation offers, as sql_literal in the SQL text and as bound
// params, and reads each back unchanged.
func TestSQLSafeValues(t *testing.T) {
	t.Parallel()
	tool, kc, s := setup(t)
	exec(t, tool, kc, "command", fmt.Sprintf(`CREATE TABLE %s.v (k int, doc jsonb, txt text)`, s))
	run := func(config map[string]any) tools.Output {
		t.Helper()
		config["auth"] = "pg"
		out, err := tool.Execute(context.Background(), &tools.Call{Keychain: kc, Config: config})
		if err != nil || out.Status != tools.StatusSuccess {
			t.Fatalf("%v %s", err, out.Error)
		}
		return out
	}
	literal, err := dsl.CompileTemplate(fmt.Sprintf(
		`INSERT INTO %s.v VALUES ({{ k }}, {{ job | tojson | sql_literal }}::jsonb, {{ job.text | sql_literal }})`, s), dsl.Pos{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range nasty {
		job := map[string]any{"text": v, "list": []any{v, int64(i)}}
		sql, err := literal.RenderString(map[string]any{"k": int64(i), "job": job})
		if err != nil {
			t.Fatal(err)
		}
		run(map[string]any{"command": sql})
		run(map[string]any{"command": fmt.Sprintf(`INSERT INTO %s.v VALUES ($1, $2::jsonb, $3)`, s),
			"params": []any{int64(100 + i), job, v}})
	}
	out := run(map[string]any{"command": fmt.Sprintf(`SELECT k, doc, txt FROM %s.v WHERE k = ANY($1::int[]) ORDER BY k`, s),
		"params": []any{"{0,1,2,3,4,5,6,7,100,101,102,103,104,105,106,107}"}})
	rows := out.Data.(map[string]any)["rows"].([]any)
	if len(rows) != 2*len(nasty) {
		t.Fatalf("%d rows back, want %d", len(rows), 2*len(nasty))
	}
	for _, r := range rows {
		row := r.(map[string]any)
		i := row["k"].(int64) % 100
		want := nasty[i]
		doc := row["doc"].(map[string]any)
		if row["txt"] != want || doc["text"] != want || !reflect.DeepEqual(doc["list"], []any{want, i}) {
			t.Errorf("row %d: got txt %q doc %v, want %q", row["k"], row["txt"], doc, want)
		}
	}
	// NULL and a multi-statement refusal.
	out = run(map[string]any{"command": "SELECT $1::text AS a, $2::int AS b", "params": []any{nil, int64(7)}})
	if got := out.Data.(map[string]any)["rows"]; !reflect.DeepEqual(got, []any{map[string]any{"a": nil, "b": int64(7)}}) {
		t.Errorf("null and int params: %v", got)
	}
	bad, err := tool.Execute(context.Background(), &tools.Call{Keychain: kc, Config: map[string]any{
		"auth": "pg", "command": "SELECT $1; SELECT 2", "params": []any{"x"}}})
	if err != nil || bad.Status != tools.StatusError {
		t.Errorf("two statements with params: %v %+v", err, bad)
	}
	if _, err := tool.Execute(context.Background(), &tools.Call{Keychain: kc, Config: map[string]any{
		"auth": "pg", "command": "SELECT $1", "params": "x"}}); !errors.Is(err, postgres.ErrBadConfig) {
		t.Errorf("params not a list: %v", err)
	}
}

// TestPartialRowBatches: a statement's rows are handed on in batches of
// PartialRows as they arrive, per statement, the last batch short.
func TestPartialRowBatches(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	tool := postgres.New(postgres.Config{PartialRows: 3})
	t.Cleanup(func() { tool.Close() })
	var got []map[string]any
	call := &tools.Call{
		Kind: "postgres", Keychain: tools.StaticURLs(map[string]string{"pg": dsn}),
		Config: map[string]any{"auth": "pg", "command": `SELECT g AS id FROM generate_series(1, 7) g;
SELECT 1 AS x WHERE false;
SELECT g AS id FROM generate_series(8, 9) g`},
		Partial: func(data any) { got = append(got, data.(map[string]any)) },
	}
	out, err := tool.Execute(context.Background(), call)
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("Execute = %+v, %v", out, err)
	}
	type batch struct {
		stmt int
		ids  string
		read int64
	}
	var batches []batch
	for _, p := range got {
		var ids []string
		for _, r := range p["rows"].([]any) {
			ids = append(ids, fmt.Sprint(r.(map[string]any)["id"]))
		}
		batches = append(batches, batch{p["statement"].(int), strings.Join(ids, ","), p["rows_read"].(int64)})
	}
	want := []batch{{1, "1,2,3", 3}, {1, "4,5,6", 6}, {1, "7", 7}, {3, "8,9", 2}}
	if !reflect.DeepEqual(batches, want) {
		t.Fatalf("batches %+v, want %+v", batches, want)
	}
	if rows := out.Data.(map[string]any)["rows"].([]any); len(rows) != 2 {
		t.Fatalf("the result is still the last statement's rows: %v", rows)
	}
}

// TestStatementRunsAgainAfterConnectionLost: the server ends the pool's
// idle connections (a restart, a failover, pg_terminate_backend); the
// next call's statement, which failed on its dead connection, runs once
// more on a fresh one and succeeds, applied once.
func TestStatementRunsAgainAfterConnectionLost(t *testing.T) {
	t.Parallel()
	tool, _, s := setup(t)
	ctx := context.Background()
	app := "tools_pg_lost_" + s
	kc := tools.StaticURLs(map[string]string{"pg": testenv.WithAppName(testenv.Postgres(t), app)})
	exec(t, tool, kc, "command", fmt.Sprintf(`CREATE TABLE %s.hit (n serial PRIMARY KEY)`, s))

	admin, err := pgx.Connect(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var killed int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&killed); err != nil || killed == 0 {
		t.Fatalf("terminate the tool's backends: %d killed, %v", killed, err)
	}
	for left := 1; left > 0; {
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&left); err != nil {
			t.Fatal(err)
		}
	}

	out := exec(t, tool, kc, "command", fmt.Sprintf(`INSERT INTO %s.hit DEFAULT VALUES`, s))
	if out.Status != tools.StatusSuccess {
		t.Fatalf("insert on a pool whose connections the server ended: %s %s", out.Status, out.Error)
	}
	var n int
	if err := admin.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.hit`, s)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows inserted: %d (%v), want 1", n, err)
	}
}

// TestStatementNotRunAgainAfterPartials: a statement whose connection the
// server ends after some of its rows were handed on as partial results
// is not run again (that would hand the same rows on twice): the call
// fails, each row handed on once.
func TestStatementNotRunAgainAfterPartials(t *testing.T) {
	t.Parallel()
	_, _, s := setup(t)
	tool := postgres.New(postgres.Config{PartialRows: 5})
	t.Cleanup(func() { tool.Close() })
	ctx := context.Background()
	app := "tools_pg_partial_" + s
	admin, err := pgx.Connect(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	first := make(chan struct{})
	var once sync.Once
	seen := map[string]int{}
	var mu sync.Mutex
	call := &tools.Call{
		Kind: "postgres", Keychain: tools.StaticURLs(map[string]string{"pg": testenv.WithAppName(testenv.Postgres(t), app)}),
		// Rows of 2 KB, so the server sends the first ones before it
		// sleeps at row 20 (never woken: the backend is ended first).
		Config: map[string]any{"auth": "pg", "command": `SELECT g AS id, repeat('x', 2000) AS pad,
			CASE WHEN g = 20 THEN pg_sleep(30) END AS nap FROM generate_series(1, 40) g`},
		Partial: func(data any) {
			mu.Lock()
			for _, r := range data.(map[string]any)["rows"].([]any) {
				seen[fmt.Sprint(r.(map[string]any)["id"])]++
			}
			mu.Unlock()
			once.Do(func() { close(first) })
		},
	}
	done := make(chan tools.Output, 1)
	go func() {
		out, err := tool.Execute(ctx, call)
		if err != nil {
			out = tools.Output{Status: tools.StatusError, Error: err.Error()}
		}
		done <- out
	}()
	<-first
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if out.Status != tools.StatusError {
		t.Fatalf("a statement cut after its partials: status %s, want error", out.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("row %s handed on %d times, want once", id, n)
		}
	}
}

// TestConnectToSilentServerTimesOut: a server that accepts the connection
// and never answers (a frozen process, a proxy gone silent) fails the
// call within pgretry.ConnectTimeout, naming the credential, where the
// URL sets no connect_timeout; before, the call waited for ever.
func TestConnectToSilentServerTimesOut(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	hole := testenv.NewProxy(t, u.Host)
	hole.Hole()
	u.Host = hole.Addr()
	tool := postgres.New(postgres.Config{})
	t.Cleanup(func() { tool.Close() })
	kc := tools.StaticURLs(map[string]string{"frozen": u.String()})
	ctx, cancel := context.WithTimeout(context.Background(), 3*pgretry.ConnectTimeout)
	defer cancel()
	start := time.Now()
	out, err := tool.Execute(ctx, &tools.Call{Keychain: kc, Config: map[string]any{"auth": "frozen", "command": "SELECT 1"}})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("a silent server must be an error Output, got %v", err)
	}
	if out.Status != tools.StatusError || !strings.Contains(out.Error, `"frozen"`) || ctx.Err() != nil {
		t.Fatalf("after %v: %+v (context: %v); want an error naming the credential within %v", took, out, ctx.Err(), pgretry.ConnectTimeout)
	}
}

// TestListParamsAsArrays: a list bound where the statement wants an array
// (= ANY($1), $1::text[], an int[][] column) goes as that array, nasty
// strings and NULL elements intact, as psycopg's users expect; bound where
// it wants jsonb, the same list stays JSON. A list used to go as JSON
// only, and = ANY($1::int[]) failed with "malformed array literal".
func TestListParamsAsArrays(t *testing.T) {
	t.Parallel()
	tool, kc, s := setup(t)
	run := func(command string, params ...any) []any {
		t.Helper()
		out, err := tool.Execute(context.Background(), &tools.Call{Keychain: kc,
			Config: map[string]any{"auth": "pg", "command": command, "params": params}})
		if err != nil || out.Status != tools.StatusSuccess {
			t.Fatalf("%s: %v %s", command, err, out.Error)
		}
		return out.Data.(map[string]any)["rows"].([]any)
	}
	rows := run("SELECT count(*) AS n FROM generate_series(1, 10) g WHERE g = ANY($1::int[])", []any{int64(2), int64(3), int64(11)})
	if n := rows[0].(map[string]any)["n"]; n != int64(2) {
		t.Errorf("ANY($1::int[]): %v rows, want 2", n)
	}
	withNull := append(slices.Clone(nasty), nil)
	rows = run("SELECT $1::text[] AS a, array_length($1::text[], 1) AS n", withNull)
	if got := rows[0].(map[string]any); !reflect.DeepEqual(got["a"], withNull) || got["n"] != int64(len(withNull)) {
		t.Errorf("$1::text[] = %v (%v elements), want %q", got["a"], got["n"], withNull)
	}
	exec(t, tool, kc, "command", fmt.Sprintf(`CREATE TABLE %s.names (name text, grid int[][])`, s))
	exec(t, tool, kc, "command", fmt.Sprintf(`INSERT INTO %s.names VALUES ('O''Brien', NULL), ('x', NULL)`, s))
	rows = run(fmt.Sprintf(`SELECT name FROM %s.names WHERE name = ANY($1)`, s), []any{"O'Brien", `"quoted"`})
	if len(rows) != 1 || rows[0].(map[string]any)["name"] != "O'Brien" {
		t.Errorf("name = ANY($1): %v", rows)
	}
	rows = run(fmt.Sprintf(`UPDATE %s.names SET grid = $1 WHERE name = 'x' RETURNING grid[2][1] AS cell`, s),
		[]any{[]any{int64(1), int64(2)}, []any{int64(3), int64(4)}})
	if cell := rows[0].(map[string]any)["cell"]; cell != int64(3) {
		t.Errorf("int[][] from nested lists: grid[2][1] = %v, want 3", cell)
	}
	rows = run("SELECT jsonb_array_length($1::jsonb) AS n, $1::jsonb->>1 AS second", []any{"a", "b,c"})
	if got := rows[0].(map[string]any); got["n"] != int64(2) || got["second"] != "b,c" {
		t.Errorf("a list bound as jsonb: %v", got)
	}
}
