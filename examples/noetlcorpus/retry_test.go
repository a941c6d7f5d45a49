package noetlcorpus

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/internal/clirun"
	"github.com/cursorflow/cursorflow/internal/paginatedapi"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// The retry_test playbooks: each retries a failing call under a task
// policy (`then: {do: retry, attempts: N}`, N attempts in all) and goes on
// to an end step once it succeeds.

// failures reports whether attempts is n-1 failures and then, when ok, a
// success (else one failure more).
func failures(as []clirun.Attempt, n int, ok bool) bool {
	if len(as) != n {
		return false
	}
	for i, a := range as {
		if a.Failed != (i < n-1 || !ok) {
			return false
		}
	}
	return true
}

// TestRetryHTTPStatusCode: http_retry_status_code.yaml retries a 5xx up to
// 3 attempts. Its test_url (httpbin.org) is a server that answers 503
// twice, then 200: exactly 3 requests, and the run goes on to end.
func TestRetryHTTPStatusCode(t *testing.T) {
	t.Parallel()
	a := newAPI(t, map[string]any{"url": "/get"}, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK)
	r := playbook(t, "retry_test/http_retry_status_code.yaml").Set("test_url", a.URL+"/get").Run(t)
	r.Completed(t)
	if as := r.Attempts(t, "start"); !failures(as, 3, true) || !strings.Contains(as[0].Error, "HTTP 503") {
		t.Errorf("start: %+v, want two 503s and a success", as)
	}
	if n := len(a.requests()); n != 3 {
		t.Errorf("the server saw %d requests, want 3", n)
	}
	same(t, r, "end", map[string]any{"status": "complete"})
}

// TestRetryHTTPWithStop: http_retry_with_stop.yaml stops retrying once the
// status is 200: a server that answers 200 at once sees one request. One
// that never does sees the 3 attempts the policy allows, and the
// execution fails at start.
func TestRetryHTTPWithStop(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		status int
		want   int
	}{{"ok", http.StatusOK, 1}, {"unavailable", http.StatusServiceUnavailable, 3}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, map[string]any{"url": "/get"}, c.status)
			r := playbook(t, "retry_test/http_retry_with_stop.yaml").Set("test_url", a.URL+"/get").Run(t)
			ok := c.status == http.StatusOK
			if ok {
				r.Completed(t)
				same(t, r, "end", map[string]any{"status": "complete"})
			} else if r.Status != "failed" || r.FailedStep != "start" || !strings.Contains(r.Error, "503") || r.Steps["end"] != "" {
				t.Fatalf("execution %s: %s at %s: %s (steps %v), want failed at start on the 503\n%s", r.ExecutionID, r.Status, r.FailedStep, r.Error, r.Steps, r.Output)
			}
			if as := r.Attempts(t, "start"); !failures(as, c.want, ok) {
				t.Errorf("start: %+v, want %d attempts", as, c.want)
			}
			if n := len(a.requests()); n != c.want {
				t.Errorf("the server saw %d requests, want %d", n, c.want)
			}
		})
	}
}

// TestRetrySimpleConfig: retry_simple_config.yaml calls NoETL's mock API's
// /flaky?page=1&fail_on=1 from three steps, each retrying a 5xx. The API
// (internal/paginatedapi, a port of NoETL's) fails only the first request
// for a page, so the first step retries once and the other two succeed at
// once: 4 requests.
func TestRetrySimpleConfig(t *testing.T) {
	t.Parallel()
	api := paginatedapi.New()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	r := playbook(t, "retry_test/retry_simple_config.yaml").Set("api_url", srv.URL).Run(t)
	r.Completed(t)
	if as := r.Attempts(t, "boolean_retry"); !failures(as, 2, true) || !strings.Contains(as[0].Error, "500") {
		t.Errorf("boolean_retry: %+v, want a 500 and a success", as)
	}
	for _, s := range []string{"integer_retry", "full_config_retry"} {
		if as := r.Attempts(t, s); !failures(as, 1, true) {
			t.Errorf("%s: %+v, want one success", s, as)
		}
	}
	if n := api.Calls("/api/v1/flaky"); n != 4 {
		t.Errorf("/flaky answered %d requests, want 4", n)
	}
	same(t, r, "end", map[string]any{"status": "complete"})
}

// TestRetryPostgresConnection: postgres_retry_connection.yaml retries a
// failed query up to 3 attempts. Its credential pg_k8s is the test
// database behind a proxy that refuses connections, as a server still
// starting does, until two attempts have failed. pgx follows a failed
// connection's startup with a cancel request on a connection of its own
// (long before the policy's 1 s delay ends), so each failed attempt takes
// two: the proxy refuses 4, and the third attempt reads the query's row.
func TestRetryPostgresConnection(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	proxy.RefuseNext(4)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("sslmode", "disable") // no TLS first, then plain text
	u.RawQuery = q.Encode()
	r := playbook(t, "retry_test/postgres_retry_connection.yaml").Credential("pg_k8s", u.String()).Run(t)
	r.Completed(t)
	if as := r.Attempts(t, "start"); !failures(as, 3, true) {
		t.Errorf("start: %+v, want two failed connections and a success", as)
	}
	if rows := r.Result(t, "start")["rows"]; !reflect.DeepEqual(rows, []any{map[string]any{"test_value": 1.0}}) {
		t.Errorf("start: rows %v", rows)
	}
	if n := proxy.Accepted(); n != 5 {
		t.Errorf("the proxy accepted %d connections, want 5: 2 refused attempts, their cancel requests and the one that succeeded", n)
	}
	same(t, r, "end", map[string]any{"status": "complete"})
}

// TestRetryDuckDB: duckdb_retry_query.yaml runs its test_query in DuckDB
// and retries an error up to 3 attempts. Its query answers at once; a
// query of a table that does not exist fails 3 times and then the
// execution, at retry.
func TestRetryDuckDB(t *testing.T) {
	t.Parallel()
	t.Run("answer", func(t *testing.T) {
		t.Parallel()
		r := playbook(t, "retry_test/duckdb_retry_query.yaml").Run(t)
		r.Completed(t)
		if as := r.Attempts(t, "retry"); !failures(as, 1, true) {
			t.Errorf("retry: %+v, want one success", as)
		}
		if rows := r.Result(t, "retry")["rows"]; !reflect.DeepEqual(rows, []any{map[string]any{"answer": 42.0, "status": "success"}}) {
			t.Errorf("retry: rows %v", rows)
		}
		same(t, r, "end", map[string]any{"status": "complete"})
	})
	t.Run("missing_table", func(t *testing.T) {
		t.Parallel()
		r := playbook(t, "retry_test/duckdb_retry_query.yaml").Set("test_query", "SELECT * FROM no_such_table").Run(t)
		if r.Status != "failed" || r.FailedStep != "retry" || r.Steps["end"] != "" {
			t.Fatalf("execution %s: %s at %s (steps %v), want failed at retry\n%s", r.ExecutionID, r.Status, r.FailedStep, r.Steps, r.Output)
		}
		as := r.Attempts(t, "retry")
		if !failures(as, 3, false) || !strings.Contains(as[2].Error, "no_such_table") {
			t.Errorf("retry: %+v, want 3 failures naming no_such_table", as)
		}
	})
}

// randomFailure is the message of python_retry_exception.yaml's exception.
var randomFailure = regexp.MustCompile(`^Random failure \(value: (\d+)\)$`)

// TestRetryPythonException: python_retry_exception.yaml raises for a
// random value below 70 and retries up to 5 attempts. Whatever the draws,
// every failed attempt raised for a value below 70, and either a value of
// 70 or more succeeded within 5 attempts and end ran, or all 5 failed and
// so did the execution, at start.
func TestRetryPythonException(t *testing.T) {
	t.Parallel()
	r := playbook(t, "retry_test/python_retry_exception.yaml").Run(t)
	as := r.Attempts(t, "start")
	if len(as) == 0 || len(as) != r.Commands("start") {
		t.Fatalf("start: %d attempts finished of %d issued\n%s", len(as), r.Commands("start"), r.Output)
	}
	for i, a := range as[:len(as)-1] {
		if v := drawn(t, a); !a.Failed || v >= 70 {
			t.Errorf("attempt %d: %+v, want a failure for a value below 70", i+1, a)
		}
	}
	last := as[len(as)-1]
	switch r.Status {
	case "completed":
		d, _ := last.Data["data"].(map[string]any)
		if last.Failed || last.Data["success"] != true || clirun.Num(d["value"]) < 70 || len(as) > 5 {
			t.Errorf("completed after %d attempts, the last %+v", len(as), last)
		}
		same(t, r, "end", map[string]any{"status": "complete"})
		t.Logf("completed at attempt %d", len(as))
	case "failed":
		if v := drawn(t, last); !last.Failed || v >= 70 || len(as) != 5 || r.FailedStep != "start" || r.Steps["end"] != "" {
			t.Errorf("failed at %s after %d attempts (steps %v), the last %+v; want 5 failed attempts at start", r.FailedStep, len(as), r.Steps, last)
		}
		t.Logf("failed after 5 attempts")
	default:
		t.Fatalf("execution %s: %s\n%s", r.ExecutionID, r.Status, r.Output)
	}
}

// drawn returns the value a failed attempt of python_retry_exception
// raised for, or 100 (no failure) when it raised something else.
func drawn(t *testing.T, a clirun.Attempt) int {
	t.Helper()
	msg, _ := a.Data["message"].(string)
	m := randomFailure.FindStringSubmatch(msg)
	if !a.Failed || m == nil {
		return 100
	}
	v, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return v
}
