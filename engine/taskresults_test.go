package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/resultstore/resultstoreurl"
)

// pagesFlow is NoETL's pagination shape (test_loop_with_pagination.yaml):
// a pipeline step fetches a page, stores it and checks for more, and its
// arcs read the check through fetch_page.results.check. The step's last
// task is not the check, so only the task results tell the arcs what to
// do. Inside the pipeline, the store task reads the fetch through the
// pipeline-local results and by the fetch task's name (both its result
// data, as in NoETL: test_loop_with_pagination.yaml hands '{{ fetch }}'
// to a python task that reads its data.paging), also on its retry (a new
// command, which rebuilds them from the carried pipeline state). A later step reads a task result of each kind:
// an earlier task's and the last task's.
const pagesFlow = header + `
workload: {pages: 3}
workflow:
  - step: start
    tool: {kind: echo}
    next: [fetch_page]
  - step: fetch_page
    tool:
      - name: fetch
        kind: echo
        page: '{{ ctx.page | default(1) }}'
      - name: check
        kind: echo
        has_more: '{{ (results.fetch.page | int) < pages }}'
      - name: store
        kind: rec
        key: store
        fail_attempts: 1
        stored: '{{ results.fetch.page }}'
        via_name: '{{ fetch.page }}'
        checked: '{{ results.check.has_more }}'
        spec:
          policy:
            rules:
              - when: '{{ output.status == "error" }}'
                then: {do: retry, attempts: 2, delay: 0}
    set:
      ctx.page: '{{ (fetch_page.results.fetch.page | int) + 1 }}'
      ctx.seen: '{{ (ctx.seen | default([])) + [fetch_page.results.store.stored] }}'
    next:
      spec: {mode: exclusive}
      arcs:
        - step: fetch_page
          when: '{{ fetch_page.results.check.has_more == true }}'
        - step: report
          when: '{{ fetch_page.results.check.has_more != true }}'
  - step: report
    tool:
      kind: echo
      seen: '{{ ctx.seen }}'
      last_fetch: '{{ fetch_page.results.fetch.page }}'
      last_store: '{{ fetch_page.results.store.stored }}'
      own: '{{ fetch_page.stored }}'
      via_name: '{{ fetch_page.via_name }}'
`

// TestPipelineTaskResults: a pipeline step's task results are read by
// name, as NoETL's step.results.<task>: by its arcs and set, by later
// steps, and (pipeline-local results) by its own later tasks. The flow
// pages three times: if the arcs could not read the check, it would stop
// after one page (the != arc), as it silently did before.
func TestPipelineTaskResults(t *testing.T) {
	t.Parallel()
	b := setupWith(t, engine.Config{Tools: bigTools()})
	sum, evs := b.run(t, pagesFlow, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("%s at %s %s: %s", sum.Status, sum.Step, sum.Field, sum.Error)
	}
	got := data(t, sum, "report")
	if s := toStrings(got["seen"]); strings.Join(s, ",") != "1,2,3" {
		t.Fatalf("pages stored: %v, want 1,2,3 (report: %v)", got["seen"], got)
	}
	if toString(got["last_fetch"]) != "3" || toString(got["last_store"]) != "3" || toString(got["own"]) != "3" || toString(got["via_name"]) != "3" {
		t.Fatalf("report read %v", got)
	}
	issued := 0
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued && ev.Step == "fetch_page" {
			issued++
		}
	}
	if n := b.rec.count("store"); n != 6 || issued != 6 {
		t.Fatalf("the store task ran %d times in %d commands, want 6 in 6 (3 pages, each retried once)", n, issued)
	}
	// The step's result names its last task and does not repeat its data
	// among the task results.
	r, _ := sum.Results["fetch_page"].(map[string]any)
	if r["task"] != "store" {
		t.Fatalf("fetch_page's result names task %v, want store: %v", r["task"], r)
	}
	tr, _ := r["tasks"].(map[string]any)
	if _, ok := tr["store"]; ok || tr["fetch"] == nil || tr["check"] == nil {
		t.Fatalf("fetch_page's task results: %v", tr)
	}
}

// TestPipelineTaskResultsSurviveEveryCut: the task results are on
// record, not in a process: a history cut after any event and resumed by
// a fresh engine pages the same three times (the arcs read
// fetch_page.results.check), and the last step reads the same task
// results.
func TestPipelineTaskResultsSurviveEveryCut(t *testing.T) {
	t.Parallel()
	resumeFromEveryCut(t, header+`
workflow:
  - step: start
    tool: {kind: rec, key: start}
    next: [fetch_page]
  - step: fetch_page
    tool:
      - name: fetch
        kind: rec
        key: 'fetch-{{ ctx.page | default(1) }}'
        page: '{{ ctx.page | default(1) }}'
      - name: check
        kind: rec
        key: 'check-{{ results.fetch.page }}'
        has_more: '{{ (results.fetch.page | int) < 3 }}'
    set:
      ctx.page: '{{ (fetch_page.results.fetch.page | int) + 1 }}'
    next:
      spec: {mode: exclusive}
      arcs:
        - step: fetch_page
          when: '{{ fetch_page.results.check.has_more == true }}'
        - step: report
          when: '{{ fetch_page.results.check.has_more != true }}'
  - step: report
    tool: {kind: rec, key: report, last: '{{ fetch_page.results.fetch.page }}', more: '{{ fetch_page.has_more }}'}
`, func(k int, got *engine.Summary, evs []eventlog.Event) {
		r, _ := got.Results["report"].(map[string]any)
		d, _ := r["data"].(map[string]any)
		if toString(d["last"]) != "3" || toString(d["more"]) != "false" {
			t.Fatalf("cut at %d: report read %v, want the third page's task results", k, d)
		}
		// A command in flight at the cut is issued again: count the
		// commands, not their attempts.
		fetches := map[string]bool{}
		for _, ev := range evs {
			if ev.Type == eventlog.TypeCommandIssued && ev.Step == "fetch_page" {
				fetches[ev.CommandID[:strings.LastIndexByte(ev.CommandID, '@')]] = true
			}
		}
		if len(fetches) != 3 {
			t.Fatalf("cut at %d: fetch_page ran as %d commands, want 3", k, len(fetches))
		}
	})
}

// TestPipelineTaskResultsKeepData: a step whose own data has a results
// key (an API's body often has) keeps it; a single tool's step has no
// task results.
func TestPipelineTaskResultsKeepData(t *testing.T) {
	t.Parallel()
	sum, _ := runCompleted(t, engine.Config{Tools: bigTools()}, header+`
workflow:
  - step: start
    tool:
      - name: first
        kind: echo
        a: 1
      - name: api
        kind: echo
        results: [x, y]
    next: [single]
  - step: single
    tool: {kind: echo, name: only, b: 2}
    next: [end]
  - step: end
    tool:
      kind: echo
      body: '{{ start.results }}'
      single: '{{ single.results is defined }}'
`)
	got := data(t, sum, "end")
	if s := toStrings(got["body"]); strings.Join(s, ",") != "x,y" {
		t.Fatalf("start.results is %v, want the api's own results [x y]", got["body"])
	}
	if toString(got["single"]) != "false" {
		t.Fatalf("a single tool's step has results: %v", got["single"])
	}
}

// TestPipelineTaskResultsStored: an earlier task's result over the result
// store's threshold travels as a reference, like the step's own data, and
// reads the same through step.results.<task>.
func TestPipelineTaskResultsStored(t *testing.T) {
	t.Parallel()
	sum, evs := runCompleted(t, engine.Config{Tools: bigTools(), Results: fileStore(t)}, header+`
workflow:
  - step: start
    tool:
      - name: load
        kind: big
        n: 500
      - name: count
        kind: echo
        n: '{{ results.load.rows | length }}'
    next:
      - step: use
        when: '{{ start.results.load.rows | length == 500 }}'
  - step: use
    tool:
      kind: echo
      last: '{{ (start.results.load.rows | last).id }}'
      n: '{{ start.n }}'
`)
	got := data(t, sum, "use")
	if toString(got["last"]) != "499" || toString(got["n"]) != "500" {
		t.Fatalf("use read %v", got)
	}
	_, largest, typ := payloadBytes(evs)
	if largest > 16<<10 {
		t.Fatalf("the largest event payload (%s) is %d bytes: the 500 KB task result is inline", typ, largest)
	}
	refs := 0
	for _, ev := range evs {
		if ev.Type == eventlog.TypeStepCompleted && strings.Contains(string(ev.Payload), resultstore.MarkerKey) {
			refs++
		}
	}
	if refs == 0 {
		t.Fatal("start's step.completed holds no reference")
	}
}

// TestHTTPResultBody: a later step reads an http step's response body at
// STEP.data.KEY (NoETL's Python http tool) and at STEP.body.KEY (its Rust
// tool, for which the cursor and offset pagination playbooks are written);
// the result is stored once, under data.
func TestHTTPResultBody(t *testing.T) {
	t.Parallel()
	sum, evs := runCompleted(t, engine.Config{Tools: httpTools()}, bodyFlow(t, `{"events": [1, 2, 3], "next_cursor": "Mg=="}`))
	got := data(t, sum, "use")
	if got["from_body"] != "3 Mg==" || got["from_data"] != "3 Mg==" || toString(got["status"]) != "200" {
		t.Fatalf("use read %v", got)
	}
	for _, ev := range evs {
		if ev.Type == eventlog.TypeStepCompleted && ev.Step == "start" && strings.Contains(string(ev.Payload), `"body"`) {
			t.Fatalf("the http result is stored with a body copy: %s", ev.Payload)
		}
	}
}

// TestHTTPResultBodyOverStoredData: an http response over the result
// store's threshold is stored once, as a reference, and still reads at
// STEP.body as at STEP.data, in the step's arcs and in later steps.
func TestHTTPResultBodyOverStoredData(t *testing.T) {
	t.Parallel()
	sum, evs := runCompleted(t, engine.Config{Tools: httpTools(), Results: fileStore(t)}, storedResponseFlow(t))
	got := data(t, sum, "use")
	if got["from_body"] != "20000 Mg==" || got["from_data"] != "20000 Mg==" || toString(got["status"]) != "200" {
		t.Fatalf("use read %v", got)
	}
	stored := false
	for _, ev := range evs {
		if ev.Type == eventlog.TypeStepCompleted && ev.Step == "start" {
			stored = strings.Contains(string(ev.Payload), resultstore.MarkerKey)
		}
	}
	if !stored {
		t.Fatal("start's step.completed holds no reference: the response was not over the threshold")
	}
}

// TestHTTPResultBodyOverStoredDataResumed: TestHTTPResultBodyOverStoredData
// resumed by a fresh engine (another process) from every cut of its
// history, over the same result store: the resumed execution still reads
// the stored response as start.body, in the arc and in the next step,
// whether start ran before the cut or after it.
func TestHTTPResultBodyOverStoredDataResumed(t *testing.T) {
	t.Parallel()
	src := storedResponseFlow(t)
	store := fileStore(t)
	cfg := func() engine.Config { return engine.Config{Tools: httpTools(), Results: store} }
	resumeFromEveryCutWith(t, cfg, src, func(k int, got *engine.Summary, _ []eventlog.Event) {
		if d := data(t, got, "use"); d["from_body"] != "20000 Mg==" || d["from_data"] != "20000 Mg==" {
			t.Fatalf("cut at %d: use read %v", k, d)
		}
	})
}

// storedResponseFlow is bodyFlow over a JSON response of about 110 KB,
// over the result store's default threshold.
func storedResponseFlow(t *testing.T) string {
	t.Helper()
	events := make([]string, 0, 20000)
	for i := range 20000 {
		events = append(events, strconv.Itoa(i))
	}
	return bodyFlow(t, `{"events": [`+strings.Join(events, ",")+`], "next_cursor": "Mg=="}`)
}

// bodyFlow is a playbook whose start step GETs body (JSON with events
// and a next_cursor "Mg==") from a test server, and whose arc and next
// step (use, a rec) read it as start.body and start.data.
func bodyFlow(t *testing.T, body string) string {
	t.Helper()
	return header + `
workflow:
  - step: start
    tool: {kind: http, method: GET, url: '` + jsonServer(t, body) + `'}
    next:
      - step: use
        when: '{{ start.body.next_cursor == "Mg==" }}'
  - step: use
    tool:
      kind: rec
      key: use
      from_body: '{{ start.body.events | length }} {{ start.body.next_cursor }}'
      from_data: '{{ start.data.events | length }} {{ start.data.next_cursor }}'
      status: '{{ start.status_code }}'
`
}

// jsonServer serves body as JSON to every request until the test ends and
// returns its URL.
func jsonServer(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPipelineTaskResultsOverStoredData: the pipeline's last task's
// result is over the store's threshold, so the step's data is a
// reference; its task results still read as STEP.results.TASK, in its
// arcs and in later steps, next to the stored data's own keys.
func TestPipelineTaskResultsOverStoredData(t *testing.T) {
	t.Parallel()
	sum, _ := runCompleted(t, engine.Config{Tools: bigTools(), Results: fileStore(t)}, header+`
workflow:
  - step: start
    tool:
      - name: check
        kind: echo
        more: true
      - name: load
        kind: big
        n: 500
    next:
      - step: use
        when: '{{ start.results.check.more and start.rows | length == 500 }}'
  - step: use
    tool:
      kind: echo
      more: '{{ start.results.check.more }}'
      last: '{{ (start.rows | last).id }}'
      via_results: '{{ start.results.load.rows | length }}'
`)
	got := data(t, sum, "use")
	if toString(got["more"]) != "true" || toString(got["last"]) != "499" || toString(got["via_results"]) != "500" {
		t.Fatalf("use read %v", got)
	}
}

// TestPipelineTaskResultsOverMaxResultBytes: without a result store, an
// earlier task's result that would take the step's event over
// MaxResultBytes is left out of it: the step completes with its own
// result, and STEP.results.TASK reads nothing, where before keeping task
// results the step ran fine. A step whose own result is too large still
// fails, saying so.
func TestPipelineTaskResultsOverMaxResultBytes(t *testing.T) {
	t.Parallel()
	b := setupWith(t, engine.Config{Tools: bigTools(), MaxResultBytes: 64 << 10})
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool:
      - name: load
        kind: big
        n: 500
      - name: count
        kind: echo
        n: '{{ load.rows | length }}'
    next: [use]
  - step: use
    tool:
      kind: echo
      n: '{{ start.n }}'
      kept: '{{ start.results is defined }}'
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("%s at %s %s: %s", sum.Status, sum.Step, sum.Field, sum.Error)
	}
	if got := data(t, sum, "use"); toString(got["n"]) != "500" || toString(got["kept"]) != "false" {
		t.Fatalf("use read %v", got)
	}
	sum, _ = b.run(t, header+`
workflow:
  - step: start
    tool:
      - name: count
        kind: echo
        n: 1
      - name: load
        kind: big
        n: 500
`, nil)
	if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "Config.MaxResultBytes") {
		t.Fatalf("a step whose own result is too large: %s %s", sum.Status, sum.Error)
	}
}

// runCompleted runs src on an engine with cfg (see setupWith) and fails
// the test unless the execution completes; a failing test dumps its
// history.
func runCompleted(t *testing.T, cfg engine.Config, src string) (*engine.Summary, []eventlog.Event) {
	t.Helper()
	sum, evs := setupWith(t, cfg).run(t, src, nil)
	t.Cleanup(func() { dumpOnFail(t, evs) })
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("%s at %s %s: %s", sum.Status, sum.Step, sum.Field, sum.Error)
	}
	return sum, evs
}

// fileStore is a result store in a temporary directory, with the
// default threshold (64 KiB).
func fileStore(t *testing.T) *resultstore.Store {
	t.Helper()
	store, err := resultstoreurl.Open(context.Background(), "file://"+filepath.Join(t.TempDir(), "results"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, len(l))
	for i, x := range l {
		out[i] = toString(x)
	}
	return out
}

// TestPipelineTaskSetOutputIsResult: in a task's own set:, output is the
// task's result (its data), as in NoETL, whose pagination playbooks bind
// `fetch_result: "{{ output }}"` and read fetch_result.data.paging of an
// http task, or transform_result['items'] of a python one; it replaced
// NoETL's _prev. Policy rules keep the whole output (status, data, error).
func TestPipelineTaskSetOutputIsResult(t *testing.T) {
	t.Parallel()
	sum, _ := runCompleted(t, engine.Config{Tools: bigTools()}, header+`
workflow:
  - step: start
    tool:
      - name: fetch
        kind: echo
        page: 2
        spec:
          policy:
            rules:
              - when: '{{ output.status == "success" and output.data.page == 2 }}'
                then: {do: continue}
              - else:
                  then: {do: fail}
        set:
          fetched: '{{ output }}'
      - name: use
        kind: echo
        page: '{{ fetched.page }}'
`)
	got := data(t, sum, "start")
	if toString(got["page"]) != "2" {
		t.Fatalf("the use task read %v, want page 2 from the fetch task's result bound by its set:", got)
	}
}

// TestSingleToolPolicyReadsStepName: a single tool's policy reads the
// tool's result by the step's name, as the step's own set: does after it
// (NoETL's test_pipeline_heavy_payload.yaml: update_progress's rule sets
// ctx.total_bytes_processed from update_progress.total_bytes_processed).
// The tool's own configuration still reads the step's earlier result.
func TestSingleToolPolicyReadsStepName(t *testing.T) {
	t.Parallel()
	sum, _ := runCompleted(t, engine.Config{Tools: bigTools()}, header+`
workflow:
  - step: start
    tool:
      kind: echo
      value: '{{ (start.value | default(0) | int) + 1 }}'
      spec:
        policy:
          rules:
            - else:
                then:
                  do: continue
                  set:
                    ctx.seen: '{{ (ctx.seen | default([])) + [start.value] }}'
    next:
      spec: {mode: exclusive}
      arcs:
        - step: start
          when: '{{ (start.value | int) < 3 }}'
        - step: end
          when: '{{ (start.value | int) >= 3 }}'
  - step: end
    tool: {kind: echo, seen: '{{ ctx.seen }}'}
`)
	if s := toStrings(data(t, sum, "end")["seen"]); strings.Join(s, ",") != "1,2,3" {
		t.Fatalf("the policy saw %v, want each run's own value 1,2,3", s)
	}
}
