package noetlcorpus

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/internal/clirun"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// Each test runs one of NoETL's playbooks unchanged; see the package doc.

// same fails the test unless step's result is want.
func same(t *testing.T, r *clirun.Run, step string, want map[string]any) {
	t.Helper()
	if got := r.Result(t, step); !reflect.DeepEqual(got, want) {
		t.Errorf("%s: %v, want %v", step, got, want)
	}
}

// TestHelloWorld: hello_world.yaml passes its workload's message to a
// python step, which answers it back.
func TestHelloWorld(t *testing.T) {
	t.Parallel()
	r := playbook(t, "hello_world/hello_world.yaml").Run(t)
	r.Completed(t)
	same(t, r, "start", map[string]any{"status": "initialized"})
	same(t, r, "test_step", map[string]any{"status": "ok", "data": map[string]any{"message": "Hello World"}})
	same(t, r, "end", map[string]any{"status": "complete"})
}

// TestHTTP: http_test.yaml fetches api_url/health (NoETL's server, here a
// server of the test's own), and its python steps read the response's
// status_code and body from {{ start }} and pass the check on.
func TestHTTP(t *testing.T) {
	t.Parallel()
	a := newAPI(t, map[string]any{"status": "ok"}, http.StatusOK)
	r := playbook(t, "http_test.yaml").Set("api_url", a.URL).Run(t)
	r.Completed(t)
	same(t, r, "process", map[string]any{"status": "ok", "status_code": 200.0, "body": map[string]any{"status": "ok"}})
	same(t, r, "verify", map[string]any{"verified": true, "status_code": 200.0, "status": "passed"})
	same(t, r, "end", map[string]any{"status": "completed", "test_passed": true})
	if got := a.requests(); !reflect.DeepEqual(got, []string{"GET /health"}) {
		t.Errorf("the API saw %q, want one GET /health", got)
	}
}

// TestLoop: loop_test.yaml doubles its numbers and sorts its users in two
// sequential loops, whose python tasks read the item and loop_index from
// input_data; the steps in between check sums of their own.
func TestLoop(t *testing.T) {
	t.Parallel()
	r := playbook(t, "loop_test.yaml").Run(t)
	r.Completed(t)
	var got []map[string]any
	for _, a := range r.Attempts(t, "start") {
		got = append(got, a.Data)
	}
	var want []map[string]any
	for i := range 5 {
		n := float64(i + 1)
		want = append(want, map[string]any{"number": n, "doubled": 2 * n, "index": float64(i)})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("start's items: %v, want %v", got, want)
	}
	got = got[:0]
	for _, a := range r.Attempts(t, "user_loop") {
		got = append(got, a.Data)
	}
	want = []map[string]any{
		{"name": "Alice", "age": 30.0, "category": "senior", "index": 0.0},
		{"name": "Bob", "age": 25.0, "category": "junior", "index": 1.0},
		{"name": "Charlie", "age": 35.0, "category": "senior", "index": 2.0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("user_loop's items: %v, want %v", got, want)
	}
	same(t, r, "verify", map[string]any{"status": "passed", "original_sum": 15.0, "doubled_sum": 30.0, "count": 5.0})
	same(t, r, "end", map[string]any{"status": "ok", "test_passed": true})
}

// staleRows is why postgres_test.yaml's check fails.
const staleRows = "NoETL's stale form: process reads {{ start }} as a list of rows, but a postgres step's result is one object " +
	"{columns, row_count, rows}, here as in current NoETL (its postgres tool answers a call with its last statement's result), " +
	"so process reports \"Invalid query result format\" and verify \"failed\", although query_catalog returned the catalog's rows (checked)"

// TestPostgres: postgres_test.yaml counts NoETL's catalog by kind, with
// the credential pg_noetl_k8s, and checks that it holds playbooks. Here
// the credential is a database of the test's own whose noetl.catalog
// holds 3 playbooks and 2 credentials.
func TestPostgres(t *testing.T) {
	t.Parallel()
	p := playbook(t, "postgres_test.yaml")
	dsn := p.Database(t, "noetl_corpus", "pg_noetl_k8s")
	testenv.Exec(t, dsn, `CREATE SCHEMA noetl;
		CREATE TABLE noetl.catalog (catalog_id bigserial PRIMARY KEY, path text NOT NULL, kind text NOT NULL);
		INSERT INTO noetl.catalog (path, kind) VALUES ('a', 'Playbook'), ('b', 'Playbook'), ('c', 'Playbook'),
			('pg_k8s', 'Credential'), ('api_key', 'Credential')`)
	r := p.Run(t)
	r.Completed(t)
	rows := []any{map[string]any{"kind": "Playbook", "count": 3.0}, map[string]any{"kind": "Credential", "count": 2.0}}
	if got := r.Result(t, "start")["rows"]; !reflect.DeepEqual(got, rows) {
		t.Fatalf("query_catalog: rows %v, want %v", got, rows)
	}
	if v := r.Result(t, "process"); v["status"] == "error" && v["message"] == "Invalid query result format" {
		if v := r.Result(t, "verify"); v["status"] != "failed" {
			t.Fatalf("verify: %v, want failed after process's error", v)
		}
		t.Skip(staleRows)
	}
	same(t, r, "verify", map[string]any{"verified": true, "playbook_count": 3.0, "total_count": 5.0, "status": "passed"})
}

// TestV10Canonical: v10_canonical_example.yaml, NoETL's showcase of the
// v10 DSL: an admission rule on start, an http call whose task policy
// retries a 503 and sets ctx.fetch_completed, a named-task pipeline that
// sets ctx.transform_done, a parallel loop of postgres inserts into the
// table results (created by the test in pg_test's database, as the
// playbook expects to find it) and an end step that reads ctx.
//
// The loop's `in` renders transform's items, a count (4 here), not a list;
// a scalar is a one-item list, in NoETL's engine as here, so one row is
// stored, with item_id 4. With enabled=false, admission turns start away
// and nothing else runs.
func TestV10Canonical(t *testing.T) {
	t.Parallel()
	items := []any{map[string]any{"id": 1}, map[string]any{"id": 2}, map[string]any{"id": 3}, map[string]any{"id": 4}}
	a := newAPI(t, items, http.StatusServiceUnavailable, http.StatusOK)
	p := playbook(t, "v10_canonical_example.yaml").Set("api_url", a.URL)
	dsn := p.Database(t, "noetl_corpus", "pg_test")
	testenv.Exec(t, dsn, `CREATE TABLE results (item_id int PRIMARY KEY, data jsonb)`)
	r := p.Run(t)
	r.Completed(t)
	if as := r.Attempts(t, "fetch_data"); len(as) != 2 || !as[0].Failed || !strings.Contains(as[0].Error, "503") || as[1].Failed {
		t.Errorf("fetch_data: %+v, want a 503 and then a success", as)
	}
	if got := a.requests(); !reflect.DeepEqual(got, []string{"GET /data", "GET /data"}) {
		t.Errorf("the API saw %q, want GET /data twice", got)
	}
	same(t, r, "process_data", map[string]any{"transformed": true, "items": 4.0})
	var rows, item int
	testenv.QueryRow(t, dsn, `SELECT count(*), min(item_id) FROM results`, &rows, &item)
	if rows != 1 || item != 4 || r.Commands("store_results") != 1 {
		t.Errorf("results: %d rows, first item %d, from %d commands; want one row, item 4", rows, item, r.Commands("store_results"))
	}
	// ctx is the execution's one variable store, as NoETL's: the workload,
	// what the policies set, the loop's last item and its loop_index
	// (NoETL's commands.py keeps them in its variables), and each finished
	// step's result (its state.mark_step_completed writes them there too).
	end := r.Result(t, "end")
	ctxVars, _ := end["context"].(map[string]any)
	steps := map[string]any{}
	for _, name := range []string{"start", "fetch_data", "process_data", "store_results"} {
		steps[name] = ctxVars[name]
		delete(ctxVars, name)
	}
	if pd, _ := steps["process_data"].(map[string]any); pd["transformed"] != true || pd["status"] != "success" {
		t.Errorf("ctx.process_data: %v, want the step's result with its status", steps["process_data"])
	}
	if sr, _ := steps["store_results"].(map[string]any); !reflect.DeepEqual(sr["stats"], map[string]any{"total": 1.0, "success": 1.0, "failed": 0.0}) {
		t.Errorf("ctx.store_results: %v, want the loop's aggregate", steps["store_results"])
	}
	if !reflect.DeepEqual(end, map[string]any{"status": "COMPLETED", "message": "Workflow finished successfully",
		"context": map[string]any{"fetch_completed": true, "transform_done": true,
			"api_url": a.URL, "enabled": true, "max_items": 100.0, "item": 4.0, "loop_index": 0.0}}) {
		t.Errorf("end: %v", end)
	}

	off := p.Set("enabled", "false").Run(t)
	off.Completed(t)
	if !reflect.DeepEqual(off.Steps, map[string]string{"start": "skipped"}) || off.Commands("start") != 0 {
		t.Errorf("enabled=false: steps %v, %d commands; want start skipped and nothing run", off.Steps, off.Commands("start"))
	}
	if n := len(a.requests()); n != 2 {
		t.Errorf("enabled=false: the API saw %d requests in all, want the first run's 2", n)
	}
}

// TestBrokenPlaybook: should_error_tool_is_required.yaml's end step has
// no tool. The CLI refuses it before anything runs, naming file, line
// and column: validate with exit 1, run with exit 2 (no summary, no event
// log).
func TestBrokenPlaybook(t *testing.T) {
	t.Parallel()
	p := playbook(t, "broken_playbooks/should_error_tool_is_required.yaml")
	want := p.File + ":39:5: step end: tool is required"
	if code, out, _ := p.Exec(t, "validate", p.File); code != 1 || !strings.Contains(out, want) {
		t.Errorf("validate: exit %d, want 1 and %q:\n%s", code, want, out)
	}
	logPath := filepath.Join(t.TempDir(), "events.db")
	code, out, stderr := p.Exec(t, "run", p.File, "--eventlog", "sqlite:"+logPath, "--json")
	if code != 2 || !strings.Contains(stderr, want) || strings.Contains(out, "execution_id") {
		t.Errorf("run: exit %d, want 2, %q and no execution:\n%s%s", code, want, out, stderr)
	}
	if _, err := os.Stat(logPath); !os.IsNotExist(err) {
		t.Errorf("run wrote an event log (%v)", err)
	}
}
