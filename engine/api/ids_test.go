package api_test

import (
	"net/http"
	"testing"

	"github.com/cursorflow/cursorflow/engine/api"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestIDsNoExecutionCanHave: an execution id with a NUL byte or another
// control character, or invalid UTF-8, names no execution. Read from a
// PostgreSQL log such an id used to reach the database, which refused it,
// and the API answered 500; it now answers 404 like any unknown id.
func TestIDsNoExecutionCanHave(t *testing.T) {
	dsn := testenv.PostgresSchema(t)
	log, err := pglog.Open(t.Context(), dsn, pglog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	b := setup(t, func(c *api.Config) { c.Log, c.Projection = log, nil })
	for _, id := range []string{"%00", "a%00b", "%01", "%ff%fe", "x%0Ay"} {
		for _, rt := range []struct{ method, path string }{
			{http.MethodGet, "/v1/executions/" + id},
			{http.MethodGet, "/v1/executions/" + id + "/events"},
			{http.MethodGet, "/v1/executions/" + id + "/playbook"},
			{http.MethodPost, "/v1/executions/" + id + "/cancel"},
		} {
			r := b.do(t, rt.method, rt.path, nil)
			want(t, r, http.StatusNotFound)
			r.errorBody(t)
		}
	}
	// Still behind the token.
	want(t, b.doToken(t, "", http.MethodGet, "/v1/executions/%00", nil), http.StatusUnauthorized)
}
