package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// downThenEnded is a server whose first down requests drop their
// connection without an answer; the ones after stream execution x's end.
func downThenEnded(t *testing.T, down int32) *httptest.Server {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= down {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"execution_id\":\"x\",\"seq\":1,\"type\":%q}\n\n", eventlog.TypeExecutionCompleted)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestFollowSaysWhenTheServerIsGone: `run --server` follows an execution
// through a server that stops answering for a while; it says so once,
// instead of waiting in silence, and says so again when the server is
// back, then ends with the execution.
func TestFollowSaysWhenTheServerIsGone(t *testing.T) {
	t.Parallel()
	srv := downThenEnded(t, 3)
	c := &apiClient{base: srv.URL, http: srv.Client()}
	var warn bytes.Buffer
	var seen []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.follow(ctx, "x", 0, func(ev eventlog.Event) { seen = append(seen, ev.Type) }, &warn); err != nil {
		t.Fatal(err)
	}
	out := warn.String()
	if strings.Count(out, "does not answer") != 1 || strings.Count(out, "answers again") != 1 || len(seen) != 1 {
		t.Fatalf("events %v; said:\n%s", seen, out)
	}
}

// TestFollowHidesTheServerPassword: a --server URL may carry a password
// (basic auth at a proxy in front of the server); what `run --server`
// and `events --follow` say about the server names it without, as
// net/http's own errors do.
func TestFollowHidesTheServerPassword(t *testing.T) {
	t.Parallel()
	srv := downThenEnded(t, 1)
	base := strings.Replace(srv.URL, "http://", "http://ops:hunter2@", 1)
	c := &apiClient{base: base, http: srv.Client()}
	var warn bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.follow(ctx, "x", 0, func(eventlog.Event) {}, &warn); err != nil {
		t.Fatal(err)
	}
	out := warn.String()
	if !strings.Contains(out, "does not answer") || !strings.Contains(out, "answers again") {
		t.Fatalf("said:\n%s", out)
	}
	if strings.Contains(out, "hunter2") {
		t.Fatalf("the server's password was printed:\n%s", out)
	}
}
