package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/engine/api"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestLogUnavailableIs503: while the PostgreSQL log cannot be reached,
// reading an execution answers 503 with a message naming the event log
// (and not its host), so a client knows to try again. It answered 500
// "internal error", and `run --server` printed that, never saying the
// log was away.
func TestLogUnavailableIs503(t *testing.T) {
	proxy, viaProxy := testenv.NewURLProxy(t, testenv.PostgresSchema(t))
	log, err := pglog.Open(t.Context(), viaProxy, pglog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	b := setup(t, func(c *api.Config) { c.Log, c.Projection = log, nil })
	want(t, b.do(t, http.MethodGet, "/v1/executions/no-such-id", nil), http.StatusNotFound)

	proxy.RefuseNext(1 << 30)
	proxy.DropConnections()
	for _, path := range []string{"/v1/executions/some-id", "/v1/executions/some-id/events"} {
		r := b.do(t, http.MethodGet, path, nil)
		want(t, r, http.StatusServiceUnavailable)
		if msg := r.errorBody(t).Error; !strings.Contains(msg, "event log is unavailable") || strings.Contains(msg, proxy.Addr()) {
			t.Errorf("GET %s: error %q, want the event log named, its address not", path, msg)
		}
	}
}
