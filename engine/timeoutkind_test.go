package engine_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// retryRules is a task's spec.policy (under spec:) as a user writes it
// with NoETL's output.error: retry (three attempts in all) when the
// condition holds, fail on any other error, continue otherwise.
func retryRules(when string) string {
	return `
        policy:
          rules:
            - when: "{{ ` + when + ` }}"
              then: {do: retry, attempts: 3, delay: 0}
            - when: "{{ output.status == 'error' }}"
              then: {do: fail}
            - else:
                then: {do: continue}
`
}

// timeoutRules retries a failure that ran out of time, and fails on any
// other error.
var timeoutRules = retryRules("output.status == 'error' and output.error.kind == 'timeout' and output.error.retryable")

// TestHTTPClientTimeoutIsKindTimeout: a request the http tool's own
// timeout cut (the endpoint never answers) is output.error.kind timeout,
// as an HTTP 504 is. It used to be kind error, so a rule retrying
// timeouts never matched one that actually timed out: the endpoint saw
// one request, not three.
func TestHTTPClientTimeoutIsKindTimeout(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		<-r.Context().Done() // never answers; the client gives up
	}))
	defer srv.Close()
	b := setupWith(t, engine.Config{Tools: httpTools()})
	sum, evs := b.run(t, header+`
workload: {url: "`+srv.URL+`"}
workflow:
  - step: start
    tool:
      kind: http
      url: '{{ url }}/slow'
      timeout: 1
      spec:`+timeoutRules+`
    next:
      - step: end
  - step: end
    tool: {kind: rec, key: end}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "timeout after 1s (after 3 attempts)") {
		t.Fatalf("summary %s %q: want failed after 3 attempts that timed out", sum.Status, sum.Error)
	}
	if n := requests.Load(); n != 3 {
		t.Fatalf("the endpoint saw %d requests, want 3 (the first and two retries)", n)
	}
}

// TestPostgresTimeoutIsKindTimeout: a statement the server cancelled for
// its statement_timeout (SQLSTATE 57014), and one the step's spec.timeout
// cut, are output.error.kind timeout; a rule that lets a timeout pass
// (continue) lets the step complete. Both used to be kind error, and the
// step failed.
func TestPostgresTimeoutIsKindTimeout(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	rules := `
      spec:
        policy:
          rules:
            - when: "{{ output.status == 'error' and output.error.kind == 'timeout' }}"
              then: {do: continue}
            - when: "{{ output.status == 'error' }}"
              then: {do: fail}
`
	for _, tc := range []struct{ name, command, spec string }{
		{"statement_timeout", "SET LOCAL statement_timeout = '100ms'; SELECT pg_sleep(30)", ""},
		{"spec.timeout", "SELECT pg_sleep(30)", "\n    spec: {timeout: 0.2}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, log := cursorEngine(t, dsn)
			sum, evs := runPlaybook(t, e, log, header+`workflow:
  - step: start
    tool:
      kind: postgres
      auth: pg
      command: "`+tc.command+`"`+rules+tc.spec+`
`, engine.StartOptions{}, time.Minute)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusCompleted {
				t.Fatalf("summary %s %q: want completed, the timeout let pass by its rule", sum.Status, sum.Error)
			}
		})
	}
}
