package engine_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	toolhttp "github.com/cursorflow/cursorflow/tools/http"
)

// TestPolicyRulesSeeStructuredErrors runs rules the way NoETL's own
// playbooks write them (output.error.retryable, output.error.kind,
// output.error.status): a flaky endpoint is retried until it answers, a
// refused login fails the step instead of falling through to else:
// continue, and the step fails with the tool's own error text.
func TestPolicyRulesSeeStructuredErrors(t *testing.T) {
	t.Parallel()
	var flaky atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flaky":
			if flaky.Add(1) <= 2 {
				http.Error(w, "try later", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok": true}`))
		case "/login":
			http.Error(w, "bad token", http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	rules := `
      spec:
        policy:
          rules:
            - when: "{{ output.status == 'error' and output.error.kind == 'auth' }}"
              then: {do: fail}
            - when: "{{ output.status == 'error' and output.error.retryable and output.error.status in [500, 502, 503] }}"
              then: {do: retry, attempts: 5, delay: 0}
            - else:
                then: {do: continue}
`
	for _, tc := range []struct {
		path, status string
		calls        int64
	}{
		{"/flaky", engine.StatusCompleted, 3},
		{"/login", engine.StatusFailed, 0},
	} {
		t.Run(tc.path, func(t *testing.T) {
			b := setupWith(t, engine.Config{Tools: httpTools()})
			sum, evs := b.run(t, header+`
workload: {url: "`+srv.URL+`"}
workflow:
  - step: start
    tool:
      kind: http
      url: '{{ url }}`+tc.path+`'`+rules+`
    next:
      - step: end
  - step: end
    tool: {kind: rec, key: end}
`, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != tc.status {
				t.Fatalf("status %s (%s), want %s", sum.Status, sum.Error, tc.status)
			}
			if tc.calls > 0 && flaky.Load() != tc.calls {
				t.Fatalf("/flaky called %d times, want %d", flaky.Load(), tc.calls)
			}
			if tc.status == engine.StatusFailed && sum.Error != "HTTP 401: bad token" {
				t.Fatalf("error %q, want the tool's own text", sum.Error)
			}
		})
	}
}

// TestRetryBlockSeesStructuredErrors: a retry: block's condition reads
// output.error as a policy rule's does (retryable, status), while error
// stays the text: a flaky endpoint is retried until it answers.
func TestRetryBlockSeesStructuredErrors(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	defer srv.Close()
	b := setupWith(t, engine.Config{Tools: httpTools()})
	sum, evs := b.run(t, header+`
workload: {url: "`+srv.URL+`"}
workflow:
  - step: start
    tool:
      kind: http
      url: '{{ url }}/flaky'
      retry:
        max_attempts: 5
        backoff: fixed
        delay: 0
        retry_when: "{{ output.error.retryable and output.error.status == 503 and 'try later' in error }}"
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || calls.Load() != 3 {
		t.Fatalf("status %s (%s) after %d calls, want completed after 3", sum.Status, sum.Error, calls.Load())
	}
}

// httpTools is a registry with the http tool as http.
func httpTools() *tools.Registry {
	reg := tools.NewRegistry()
	reg.MustRegister("http", toolhttp.New(toolhttp.Config{}))
	return reg
}

// TestPolicyThenSeesStructuredErrors: a rule's then: (its set: here)
// reads the failed output as its when: does, output.error.message and
// kind included. It used to render against the raw output, where
// output.error is the error's text, so recording why a rule fired gave
// null.
func TestPolicyThenSeesStructuredErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool:
      kind: rec
      key: broken
      fail: 9
      spec:
        policy:
          rules:
            - when: "{{ output.error.kind == 'error' }}"
              then:
                do: continue
                set: {ctx.why: '{{ output.error.message }}/{{ output.error.kind }}'}
    next: [after]
  - step: after
    tool: {kind: rec, key: after, why: '{{ ctx.why }}'}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if got := data(t, sum, "after")["why"]; got != "planned failure 1/error" {
		t.Fatalf("after.why = %#v, want the structured error's message and kind", got)
	}
}

// TestPolicyFailRecordsAnError: a rule that fails a result its tool
// called a success (a 200 whose body says no, retries that never saw
// the awaited value) records the step's result as the failure it is:
// status error with the rule's text, as NoETL's output view has it. It
// said status success, error null, on a failed step.
func TestPolicyFailRecordsAnError(t *testing.T) {
	t.Parallel()
	for name, then := range map[string]string{
		"fail":  "{do: fail}",
		"retry": "{do: retry, attempts: 2, delay: 0}",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool:
      kind: rec
      key: s
      ready: false
      spec:
        policy:
          rules:
            - when: "{{ not output.data.ready }}"
              then: `+then+`
`, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusFailed {
				t.Fatalf("status %s, want failed", sum.Status)
			}
			for _, ev := range evs {
				if ev.Type != eventlog.TypeStepFailed {
					continue
				}
				var p struct {
					Result map[string]any `json:"result"`
				}
				if err := json.Unmarshal(ev.Payload, &p); err != nil {
					t.Fatal(err)
				}
				data, _ := p.Result["data"].(map[string]any)
				if p.Result["status"] != "error" || !strings.Contains(fmt.Sprint(p.Result["error"]), "decided "+name) ||
					data["ready"] != false {
					t.Fatalf("step.failed result %v: want status error, the rule's text and the tool's data", p.Result)
				}
				return
			}
			t.Fatal("no step.failed")
		})
	}
}

// TestConnectionLostMidBodyIsRetryableForGET: the rule NoETL's pagination
// playbooks end with (when output.error.retryable: retry) retries a GET
// whose response came with its status and then lost its connection
// mid-body, until the body comes whole; a POST cut the same way is not
// sent again (the server may have acted on it), and the step fails.
func TestConnectionLostMidBodyIsRetryableForGET(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method, status string
		calls          int64
	}{
		{"GET", engine.StatusCompleted, 2},
		{"POST", engine.StatusFailed, 1},
	} {
		t.Run(tc.method, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					cutMidBody(w)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"rows": [1, 2, 3]}`))
			}))
			defer srv.Close()
			b := setupWith(t, engine.Config{Tools: httpTools()})
			sum, evs := b.run(t, header+`
workload: {url: "`+srv.URL+`"}
workflow:
  - step: start
    tool:
      kind: http
      method: `+tc.method+`
      url: '{{ url }}/rows'
      spec:`+retryRules("output.error.retryable"), nil)
			defer dumpOnFail(t, evs)
			if sum.Status != tc.status {
				t.Fatalf("status %s (%s), want %s", sum.Status, sum.Error, tc.status)
			}
			if n := calls.Load(); n != tc.calls {
				t.Fatalf("%s sent %d times, want %d", tc.method, n, tc.calls)
			}
		})
	}
}

// cutMidBody answers 200 with a body of 100 bytes and resets the
// connection after the first 10.
func cutMidBody(w http.ResponseWriter) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"rows\": [")
	_ = buf.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with a reset, not a FIN
	}
	_ = conn.Close()
}
