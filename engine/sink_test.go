package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/http"
	"github.com/cursorflow/cursorflow/tools/postgres"
)

// setupPG registers http, rec and postgres (alias pg → a fresh schema).
func setupPG(t *testing.T) (*bundle, string) {
	t.Helper()
	dsn := testenv.PostgresSchema(t)
	kc := tools.StaticURLs(map[string]string{"pg": dsn})
	pg := postgres.New(postgres.Config{Keychain: kc})
	t.Cleanup(func() { _ = pg.Close() })
	log := eventlog.NewMemory()
	rec := &recorder{}
	reg := tools.NewRegistry()
	reg.MustRegister("rec", rec.tool())
	reg.MustRegister("http", http.New(http.Config{NoPacing: true}))
	reg.MustRegister("postgres", pg)
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Keychain: kc, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return &bundle{log: log, eng: e, rec: rec}, dsn
}

func queryInts(t *testing.T, dsn, sql string) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// TestSinkPerPage: each page of a paginated call is saved to postgres in
// the page's own command (the design's retry sink).
func TestSinkPerPage(t *testing.T) {
	t.Parallel()
	api := testenv.NewPagedAPI(t, 35, 0)
	b, dsn := setupPG(t)
	sum, evs := b.run(t, header+`
workload: {api: `+api.URL+`}
workflow:
  - step: start
    tool: {kind: postgres, auth: pg, command: "CREATE TABLE raw_data (pk SERIAL PRIMARY KEY, id INT NOT NULL, name TEXT, loaded_at TIMESTAMPTZ DEFAULT now())"}
    next: [fetch]`+paginatedStep("fetch", "append", `          sink:
            tool: postgres
            table: raw_data
            auth: pg
            data: '{{ response.data }}'
            mode: append
`), nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	ids := queryInts(t, dsn, "SELECT id FROM raw_data ORDER BY pk")
	if len(ids) != 35 || ids[0] != 1 || ids[34] != 35 {
		t.Fatalf("saved ids %v, want 1..35 in page order", ids)
	}
	if nulls := queryInts(t, dsn, "SELECT count(*) FROM raw_data WHERE loaded_at IS NULL"); nulls[0] != 0 {
		t.Errorf("%d rows lost their column default", nulls[0])
	}
}

// TestLoopSinkPerIterationAndUpsert: a loop's sink saves each iteration's
// result; upsert by key replaces, so running the loop twice keeps one row
// per key.
func TestLoopSinkPerIterationAndUpsert(t *testing.T) {
	t.Parallel()
	b, dsn := setupPG(t)
	sum, evs := b.run(t, header+`
workload:
  users: [{id: 1, name: ann}, {id: 2, name: bob}, {id: 3, name: cy}]
workflow:
  - step: start
    tool: {kind: postgres, auth: pg, command: "CREATE TABLE processed_users (id INT PRIMARY KEY, name TEXT, pass INT)"}
    next: [process]
  - step: process
    tool: {kind: rec, key: 'user-{{ user.id }}', id: '{{ user.id }}', name: '{{ user.name }}'}
    loop:
      collection: '{{ workload.users }}'
      element: user
      mode: async
      concurrency: 2
      sink:
        tool: postgres
        auth: pg
        table: processed_users
        mode: upsert
        key: id
        data: {id: '{{ result.id }}', name: '{{ result.name | upper }}', pass: '{{ ctx.pass | default(1) }}'}
    set:
      ctx.pass: 2
    next:
      - step: process
        when: '{{ event.name == "loop.done" and ctx.pass == 2 and (ctx.again | default(true)) }}'
        set: {ctx.again: false}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if got := queryInts(t, dsn, "SELECT pass FROM processed_users ORDER BY id"); len(got) != 3 || got[0] != 2 || got[2] != 2 {
		t.Fatalf("rows after two passes: %v, want 3 rows replaced by pass 2", got)
	}
}

// TestSinkFailureFailsTheWork: a sink that cannot save fails its step.
func TestSinkFailureFailsTheWork(t *testing.T) {
	t.Parallel()
	b, _ := setupPG(t)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool: {kind: rec, key: s, id: 1}
    sink: {tool: postgres, auth: pg, table: no_such_table, data: {id: '{{ result.id }}'}}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "sink") || !strings.Contains(sum.Error, "no_such_table") {
		t.Fatalf("summary %+v, want failed by its sink", sum)
	}

	// A data: template that renders to nothing (a typo'd key) fails the
	// step too, rather than save nothing and succeed.
	sum, evs = b.run(t, header+`
workload: {datakey: rowz}
workflow:
  - step: start
    tool: {kind: rec, key: s, row: {id: 1}}
    sink: {tool: postgres, auth: pg, table: t, data: '{{ result[workload.datakey] }}'}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "sink") || !strings.Contains(sum.Error, "data rendered to nothing") {
		t.Fatalf("summary %+v, want failed by its sink's data", sum)
	}
}

// TestSinkUpsertUpdatesInPlace: an upsert sink updates the columns its
// rows name where the key exists, as NoETL's INSERT ... ON CONFLICT does:
// the other columns keep their values, and no row is deleted on the way
// (which a foreign key's ON DELETE CASCADE would carry to other tables).
// The key may be a list of columns; of rows sharing a key the last wins.
func TestSinkUpsertUpdatesInPlace(t *testing.T) {
	t.Parallel()
	b, dsn := setupPG(t)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool:
      kind: postgres
      auth: pg
      command: |
        CREATE TABLE parents (id INT, region TEXT, name TEXT, note TEXT DEFAULT 'default', PRIMARY KEY (id, region));
        INSERT INTO parents VALUES (1, 'eu', 'old', 'kept');
        CREATE TABLE children (cid INT PRIMARY KEY, parent INT, region TEXT,
          FOREIGN KEY (parent, region) REFERENCES parents (id, region) ON DELETE CASCADE);
        INSERT INTO children VALUES (100, 1, 'eu')
    next: [save]
  - step: save
    tool: {kind: rec, key: s, rows: [{id: 1, region: eu, name: first}, {id: 2, region: eu, name: two}, {id: 1, region: eu, name: "O'Brien $$"}]}
    sink: {tool: postgres, auth: pg, table: parents, mode: upsert, key: [id, region], data: '{{ result.rows }}'}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	var name, note string
	testenv.QueryRow(t, dsn, "SELECT name, note FROM parents WHERE id = 1", &name, &note)
	if name != "O'Brien $$" || note != "kept" {
		t.Errorf("row 1: name %q note %q, want the last row's name and its note kept", name, note)
	}
	if n := queryInts(t, dsn, "SELECT count(*) FROM children"); n[0] != 1 {
		t.Errorf("%d child rows left, want 1: the upsert deleted its parent", n[0])
	}
	if n := queryInts(t, dsn, "SELECT count(*) FROM parents"); n[0] != 2 {
		t.Errorf("%d rows, want 2", n[0])
	}
}
