package noetlcorpus

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cursorflow/cursorflow/internal/clirun"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// playbook returns NoETL's playbook rel (a path under noetl-playbooks of
// the shared corpus), used as it is.
func playbook(t *testing.T, rel string) *clirun.Playbook {
	t.Helper()
	return clirun.New(filepath.Join(testenv.SharedDir(t), "noetl-playbooks", rel))
}

// api stands in for the host a playbook's URL names (httpbin.org,
// api.example.com, NoETL's own server): it answers each request with the
// next of its statuses, the last one once they run out, and a JSON body,
// and records the requests it saw.
type api struct {
	*httptest.Server
	body any

	mu       sync.Mutex
	statuses []int
	seen     []string
}

// newAPI starts an api that the test closes when it ends.
func newAPI(t *testing.T, body any, statuses ...int) *api {
	t.Helper()
	a := &api{body: body, statuses: statuses}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *api) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Method+" "+r.URL.RequestURI())
	status := a.statuses[0]
	if len(a.statuses) > 1 {
		a.statuses = a.statuses[1:]
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status != http.StatusOK {
		_ = json.NewEncoder(w).Encode(map[string]any{"detail": http.StatusText(status)})
		return
	}
	_ = json.NewEncoder(w).Encode(a.body)
}

// requests returns "METHOD /path?query" of each request the api saw.
func (a *api) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}
