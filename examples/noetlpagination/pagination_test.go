package noetlpagination

import (
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/clirun"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// Each test runs one of NoETL's pagination playbooks unchanged; see the
// package doc.

// TestBasicAsyncProbes: test_pagination_basic.yaml sends one slow (4 s)
// and four fast probes in a parallel loop and asserts, from the server's
// counters, that they overlapped (max_active >= 2).
//
// That check races: it holds when the slow probe reaches the server
// before the fast ones finish, or when two fast ones meet. cursorflow
// issues all five at once (checked here from the event log), but its
// in-process workers make no promise about which request arrives first,
// and the fast probes take about a millisecond; on a loaded machine they
// may all finish before the slow one arrives, and the playbook then
// fails with "Detected serialized or blocking behavior". The test skips
// that run, naming the race, rather than pass or fail on it.
func TestBasicAsyncProbes(t *testing.T) {
	t.Parallel()
	f := newFlow(t, "basic/test_pagination_basic.yaml")
	r := f.Run(t)
	// Every probe is issued before the first one completes.
	issued, done := 0, false
	for _, ev := range r.Events {
		switch {
		case ev.Step != "run_probes":
		case ev.Type == eventlog.TypeCommandIssued && !done:
			issued++
		case ev.Type == eventlog.TypeCommandCompleted:
			done = true
		}
	}
	if issued != 5 || r.Commands("run_probes") != 5 {
		t.Fatalf("run_probes: %d of %d commands issued before the first completed, want all 5", issued, r.Commands("run_probes"))
	}
	if r.Status == "failed" && r.FailedStep == "validate_results" && strings.Contains(r.Error, "Detected serialized or blocking behavior") {
		t.Skipf("race in the playbook's overlap check (see the test's doc): all 5 probes were issued at once, the server saw %+v", f.api.Probe())
	}
	r.Completed(t)
	v := r.Result(t, "validate_results")
	if v["status"] != "success" || clirun.Num(v["started"]) != 5 || clirun.Num(v["completed"]) != 5 || clirun.Num(v["active"]) != 0 || clirun.Num(v["max_active"]) < 2 {
		t.Fatalf("validate_results: %v", v)
	}
	if st := f.api.Probe(); st.Started != 5 || st.Completed != 5 || st.MaxActive < 2 {
		t.Fatalf("server probe stats %+v", st)
	}
}

// TestCursorAndOffset: test_pagination_cursor.yaml follows next_cursor
// through the events endpoint, test_pagination_offset.yaml pages through
// users by offset; each collects 35 items over 4 pages and reports them.
func TestCursorAndOffset(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ rel, path, count string }{
		{"cursor/test_pagination_cursor.yaml", "/api/v1/events", "total_events"},
		{"offset/test_pagination_offset.yaml", "/api/v1/users", "total_users"},
	} {
		t.Run(c.rel, func(t *testing.T) {
			t.Parallel()
			f := newFlow(t, c.rel)
			r := f.Run(t)
			r.Completed(t)
			// They were written for NoETL's Rust http tool and read the
			// page at STEP.body (templates see an http result's body there
			// as well as at STEP.data).
			v := r.Result(t, "validate_results")
			if v["status"] != "success" || clirun.Num(v[c.count]) != 35 || clirun.Num(v["first_id"]) != 1 || clirun.Num(v["last_id"]) != 35 {
				t.Fatalf("validate_results: %v", v)
			}
			if n := f.api.Calls(c.path); n != 4 {
				t.Fatalf("%d requests for 4 pages", n)
			}
		})
	}
}

// TestMaxIterations: test_pagination_max_iterations.yaml stops after
// max_iterations (2) pages although the API has more, and asserts 20
// items.
func TestMaxIterations(t *testing.T) {
	t.Parallel()
	f := newFlow(t, "max_iterations/test_pagination_max_iterations.yaml")
	r := f.Run(t)
	r.Completed(t)
	if v := r.Result(t, "validate_results"); clirun.Num(v["total_items"]) != 20 || v["max_iterations_worked"] != true {
		t.Fatalf("validate_results: %v", v)
	}
	if n, c := f.api.Calls("/api/v1/assessments"), r.Commands("fetch_with_limit"); n != 2 || c != 2 {
		t.Fatalf("%d requests in %d commands, want 2 pages in 2", n, c)
	}
}

// TestRetry: test_pagination_retry.yaml pages through /flaky, whose page 2
// fails once with HTTP 500; the fetch task's policy retries it and all 35
// items arrive.
func TestRetry(t *testing.T) {
	t.Parallel()
	f := newFlow(t, "retry/test_pagination_retry.yaml")
	r := f.Run(t)
	r.Completed(t)
	if v := r.Result(t, "validate_results"); clirun.Num(v["total_items"]) != 35 || v["retry_worked"] != true {
		t.Fatalf("validate_results: %v", v)
	}
	if n := f.api.Calls("/api/v1/flaky"); n != 5 {
		t.Fatalf("/flaky answered %d requests, want 5 (4 pages, page 2 twice)", n)
	}
}

// TestPipelineSimple: test_pipeline_simple.yaml's fetch -> transform ->
// validate pipeline, whose validate task asserts ids 1..5.
func TestPipelineSimple(t *testing.T) {
	t.Parallel()
	f := newFlow(t, "pipeline/test_pipeline_simple.yaml")
	r := f.Run(t)
	r.Completed(t)
	v := r.Result(t, "report_result")
	p, _ := v["pipeline_result"].(map[string]any)
	if v["status"] != "passed" || clirun.Num(p["items_processed"]) != 5 {
		t.Fatalf("report_result: %v", v)
	}
}

// staleRows is why the pipeline playbooks' final reports read 0 records.
const staleRows = "NoETL's stale form: final_report takes {{ validate_results }} for the row list (or its row), but a postgres " +
	"step's result is {columns, row_count, rows}, here as in current NoETL (test_fetch_load.yaml reads validate_results.rows, " +
	"test_pft_flow_v2.yaml output.data.rows): the report says 0 of 35 records although the table holds all 35 (checked)"

// storedPages runs a pipeline playbook that fetches 35 assessments page by
// page, transforms them and stores them with psycopg2 into table, and
// checks the table and the playbook's final report.
func storedPages(t *testing.T, rel, table string) {
	f := newFlow(t, rel)
	dsn := f.database(t, "test_postgres")
	f.psycopg2(t, dsn)
	r := f.Run(t)
	r.Completed(t)
	// Scores are stored times 10; names upper-cased; the batch is the
	// execution id's first 8 characters.
	var rows, ids, pages, scores, batches int
	var first, batch string
	testenv.QueryRow(t, dsn, `SELECT count(*), count(DISTINCT assessment_id), count(DISTINCT page_number), sum(score),
		count(DISTINCT batch_id), min(batch_id), min(assessment_name) FILTER (WHERE assessment_id = 1) FROM `+table,
		&rows, &ids, &pages, &scores, &batches, &batch, &first)
	if rows != 35 || ids != 35 || pages != 4 || scores != 10*(50*35+35*36/2) || batches != 1 || batch != r.ExecutionID[:8] || first != "ASSESSMENT 1" {
		t.Fatalf("%s: %d rows, %d ids, %d pages, score sum %d, %d batches (%s), first %q", table, rows, ids, pages, scores, batches, batch, first)
	}
	if n, c := f.api.Calls("/api/v1/assessments"), r.Commands("fetch_transform_store"); n != 4 || c != 4 {
		t.Fatalf("%d requests in %d commands, want 4 pages in 4", n, c)
	}
	if v := r.Result(t, "validate_results"); clirun.Num(v["row_count"]) != 1 {
		t.Fatalf("validate_results: %v", v)
	}
	v := r.Result(t, "final_report")
	s, _ := v["summary"].(map[string]any)
	if v["status"] == "failed" && clirun.Num(s["total_records_stored"]) == 0 {
		t.Skip(staleRows)
	}
	if v["status"] != "success" || clirun.Num(s["total_records_stored"]) != 35 || clirun.Num(s["pages_processed"]) != 4 {
		t.Fatalf("final_report: %v", v)
	}
}

// TestPipeline: pipeline/test_pagination_pipeline.yaml.
func TestPipeline(t *testing.T) {
	t.Parallel()
	storedPages(t, "pipeline/test_pagination_pipeline.yaml", "pagination_test_results")
}

// TestPipelineV2: pipeline_v2/test_pagination_pipeline_v2.yaml.
func TestPipelineV2(t *testing.T) {
	t.Parallel()
	storedPages(t, "pipeline_v2/test_pagination_pipeline_v2.yaml", "pagination_test_v2_results")
}

// TestPipelineErrorHandling: test_pipeline_error_handling.yaml retries a
// 500 (flaky), waits out a 429 (rate-limited, Retry-After), skips a
// failing transform and then, as its last test, fails on an HTTP 401:
// its policy says do: fail, so the execution fails at test_fail_auth and
// the task after the 401 never runs, which is what the playbook checks.
func TestPipelineErrorHandling(t *testing.T) {
	t.Parallel()
	f := newFlow(t, "pipeline/test_pipeline_error_handling.yaml")
	r := f.Run(t)
	if r.Status != "failed" || r.FailedStep != "test_fail_auth" || r.FailedField != "tool.fetch_auth_error" || !strings.Contains(r.Error, "401") {
		t.Fatalf("execution %s: %s at %s (%s): %s, want failed at test_fail_auth's fetch_auth_error with the 401\n%s",
			r.ExecutionID, r.Status, r.FailedStep, r.FailedField, r.Error, r.Output)
	}
	for _, s := range []string{"test_retry_transient", "test_rate_limit", "test_skip_transform"} {
		if r.Steps[s] != "completed" {
			t.Errorf("%s: %s", s, r.Steps[s])
		}
	}
	if _, ran := r.Steps["generate_report"]; ran {
		t.Errorf("generate_report ran after the failure")
	}
	if v := r.Result(t, "test_retry_transient"); v["status"] != "passed" || clirun.Num(v["items_received"]) != 10 {
		t.Errorf("test_retry_transient: %v", v)
	}
	if v := r.Result(t, "test_skip_transform"); v["status"] != "passed" || v["skipped"] != true {
		t.Errorf("test_skip_transform: %v", v)
	}
	if n := f.api.Calls("/api/v1/flaky"); n != 2 {
		t.Errorf("/flaky answered %d requests, want 2 (a 500, then the retry)", n)
	}
	if n := f.api.Calls("/api/v1/rate-limited"); n < 3 {
		t.Errorf("/rate-limited answered %d requests, want at least 3 (page 2 throttled, then retried)", n)
	}
}

// TestPipelineHeavyPayload: test_pipeline_heavy_payload.yaml fetches
// max_pages (3) pages of 5 items of 50 KiB each and sums the payloads.
func TestPipelineHeavyPayload(t *testing.T) {
	t.Parallel()
	f := newFlow(t, "pipeline/test_pipeline_heavy_payload.yaml")
	r := f.Run(t)
	r.Completed(t)
	v := r.Result(t, "final_report")
	s, _ := v["summary"].(map[string]any)
	if v["status"] != "ok" || clirun.Num(s["pages_processed"]) != 3 || clirun.Num(s["total_data_processed_kb"]) != 3*5*50 {
		t.Fatalf("final_report: %v", v)
	}
	if n := f.api.Calls("/api/v1/heavy"); n != 3 {
		t.Fatalf("/heavy answered %d requests, want 3", n)
	}
}

// TestLoopWithPagination: test_loop_with_pagination.yaml stores each page
// of each endpoint as a row keyed by execution_id, a BIGINT column it
// fills by splicing {{ execution_id }} into SQL unquoted.
func TestLoopWithPagination(t *testing.T) {
	t.Parallel()
	f := newFlow(t, "loop_with_pagination/test_loop_with_pagination.yaml")
	dsn := f.database(t, "pg_k8s")
	r := f.Run(t)
	switch {
	case r.FailedStep == "start" && strings.Contains(r.Error, "SQLSTATE 42601") && strings.Contains(r.Error, r.ExecutionID[:8]):
		t.Skip("gap: NoETL's execution_id is a 64-bit integer and the playbook writes it unquoted into SQL and a BIGINT column; " +
			"cursorflow's is a UUID (" + r.ExecutionID + "), so the first statement is a syntax error. " +
			"(Past that, check_results reads validate_results.data.command_0.rows, a stale form NoETL itself no longer answers.)")
	case r.FailedStep == "check_results":
		t.Skip("NoETL's stale form: check_results reads validate_results.data.command_0.rows; current NoETL answers a postgres step's last statement as rows")
	}
	r.Completed(t)
	var pages, items int
	testenv.QueryRow(t, dsn, `SELECT count(*), sum(items_count) FROM pagination_test_results`, &pages, &items)
	if pages != 2 || items != 35 {
		t.Fatalf("pagination_test_results: %d pages, %d items, want 2 and 35", pages, items)
	}
}

// TestFetchLoad: fetch_load_test/test_fetch_load.yaml loops over its 500
// patients, 5 at a time, fetching each patient's record pages and saving
// a row per patient; its check asserts 500 completed patients. The
// API's simulated latency (2–4 s a page) and its payload (100 KiB) are
// workload keys, set to 0 s and 2 KiB; its rate limit to 500 requests/s.
//
// The pages: the playbook reads output.data.meta.page, meta.totalPages
// and output.data.entry in its policy, but an http output's data is
// {status_code, headers, data: body} (test_pft_flow_v2.yaml reads the body
// as output.data.data), so has_more is never true and every patient
// stops after its first page with 0 records counted, as the paths are
// written. The test checks that too, so that a change in what the
// playbook reads shows.
func TestFetchLoad(t *testing.T) {
	t.Parallel()
	f := newFlow(t, "fetch_load_test/test_fetch_load.yaml").
		set("api_min_delay", "0").set("api_max_delay", "0").set("api_payload_kb", "2").set("api_rate_limit", "500")
	dsn := f.database(t, "pg_k8s")
	r := f.Run(t)
	r.Completed(t)
	v := r.Result(t, "check_results")
	if v["status"] != "passed" || clirun.Num(v["total_patients"]) != 500 || clirun.Num(v["completed"]) != 500 || clirun.Num(v["failed_patients"]) != 0 {
		t.Fatalf("check_results: %v", v)
	}
	var patients, done, pages, records int
	testenv.QueryRow(t, dsn, `SELECT count(*), count(*) FILTER (WHERE completed), sum(pages_fetched), sum(records_fetched)
		FROM public.fetch_load_test_results WHERE execution_id = '`+r.ExecutionID+`'`, &patients, &done, &pages, &records)
	if patients != 500 || done != 500 {
		t.Fatalf("fetch_load_test_results: %d patients, %d completed, want 500", patients, done)
	}
	if n := f.api.Calls("/api/v1/patient-records"); pages != 500 || records != 0 || n < 500 {
		t.Fatalf("%d pages and %d records saved from %d requests, want 500 first pages and 0 records (see the test's doc)", pages, records, n)
	}
}
