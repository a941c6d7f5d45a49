package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/internal/apitest"
)

const testToken = "s3cret-token"

const header = "apiVersion: noetl.io/v2\nkind: Playbook\n"

// echoPlaybook runs one step whose echo tool returns its rendered config.
const echoPlaybook = header + `metadata: {name: echo}
workload: {greeting: hello, n: 1}
workflow:
  - step: start
    tool: {kind: echo, msg: '{{ greeting }} {{ n }}'}
`

// gatedPlaybook blocks in its first step until the gate opens (or the
// command is cancelled).
const gatedPlaybook = header + `metadata: {name: gated}
workflow:
  - step: start
    tool: {kind: gate}
`

// loopPlaybook loops over workload.items.
const loopPlaybook = header + `metadata: {name: loop}
workload: {items: [1, 2, 3]}
workflow:
  - step: start
    loop:
      in: '{{ workload.items }}'
      iterator: it
      spec: {mode: parallel, max_in_flight: 2}
    tool: {kind: echo, msg: 'item {{ iter.it }}'}
`

// bundle is an API server on an in-process engine (see apitest.Server
// for its echo and gate tools).
type bundle struct {
	*apitest.Server
}

// testLogger logs into the test's output, shown when it fails or with -v.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type option func(*api.Config)

func setup(t *testing.T, opts ...option) *bundle {
	t.Helper()
	return &bundle{apitest.Start(t, apitest.Config{Token: testToken, Logger: testLogger(t), Configure: func(c *api.Config) {
		for _, o := range opts {
			o(c)
		}
	}})}
}

// response is a finished request.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r response) errorBody(t *testing.T) api.ErrorBody {
	t.Helper()
	var e api.ErrorBody
	r.decode(t, &e)
	if e.Error == "" {
		t.Fatalf("error body without message: %s", r.body)
	}
	return e
}

func (b *bundle) do(t *testing.T, method, path string, body any) response {
	t.Helper()
	return b.doToken(t, testToken, method, path, body)
}

func (b *bundle) doToken(t *testing.T, token, method, path string, body any) response {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, b.HTTP.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := b.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: data}
}

func want(t *testing.T, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
}

// start starts src and returns the execution id.
func (b *bundle) start(t *testing.T, req api.StartRequest) string {
	t.Helper()
	r := b.do(t, http.MethodPost, "/v1/executions", req)
	want(t, r, http.StatusCreated)
	var s api.Started
	r.decode(t, &s)
	if s.ExecutionID == "" {
		t.Fatalf("no execution id in %s", r.body)
	}
	if loc := r.header.Get("Location"); loc != "/v1/executions/"+s.ExecutionID {
		t.Errorf("Location %q", loc)
	}
	return s.ExecutionID
}

// waitStatus polls GET /v1/executions/{id} until its status is status.
func (b *bundle) waitStatus(t *testing.T, id, status string) engine.Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := b.do(t, http.MethodGet, "/v1/executions/"+id, nil)
		want(t, r, http.StatusOK)
		var st engine.Status
		r.decode(t, &st)
		if st.Status == status {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s still %s, want %s: %s", id, st.Status, status, r.body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRunning waits until the execution's first command is in flight.
func (b *bundle) waitInFlight(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := engine.Inspect(context.Background(), b.Log, id)
		if err == nil && len(st.InFlight) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s never had a command in flight (%v)", id, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	id, event, data string
}

// readSSE reads a stream until it ends, returning its events and the
// number of keepalive comments.
func readSSE(t *testing.T, r io.Reader) (events []sseEvent, comments int) {
	return readSSENotify(t, r, nil)
}

// readSSENotify is readSSE calling onComment (if set) on each comment.
func readSSENotify(t *testing.T, r io.Reader, onComment func()) (events []sseEvent, comments int) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != (sseEvent{}) {
				events = append(events, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"):
			comments++
			if onComment != nil {
				onComment()
			}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			// Errorf, not Fatalf: this may run off the test goroutine.
			t.Errorf("unexpected SSE line %q", line)
			return events, comments
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("read stream: %v", err)
	}
	return events, comments
}
