package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// PagedAPI is a local HTTP API for pagination and retry tests.
// GET /items?page=N&pageSize=S serves items 1..Total as
// {data: [{id, name}...], paging: {page, pageSize, hasMore}}; /flaky
// answers 503 to its first fails calls (with fail_on=N, to its first fails
// calls for page N), then as /items. It counts the calls to each
// path?query.
type PagedAPI struct {
	*httptest.Server
	Total int

	mu    sync.Mutex
	calls map[string]int
	fails int
}

// NewPagedAPI starts a PagedAPI that the test closes when it ends.
func NewPagedAPI(t testing.TB, total, fails int) *PagedAPI {
	a := &PagedAPI{Total: total, calls: map[string]int{}, fails: fails}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *PagedAPI) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.calls[r.URL.Path+"?"+r.URL.RawQuery]++
	failOn := r.URL.Query().Get("fail_on")
	flaky := r.URL.Path == "/flaky" && a.fails > 0 && (failOn == "" || failOn == r.URL.Query().Get("page"))
	if flaky {
		a.fails--
	}
	a.mu.Unlock()
	if flaky {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	size, _ := strconv.Atoi(r.URL.Query().Get("pageSize"))
	page, size = max(page, 1), max(size, 1)
	if r.URL.Query().Get("pageSize") == "" {
		size = 10
	}
	items := []any{}
	for i := (page-1)*size + 1; i <= min(a.Total, page*size); i++ {
		items = append(items, map[string]any{"id": i, "name": fmt.Sprintf("item-%d", i)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"data": items, "paging": map[string]any{"page": page, "pageSize": size, "hasMore": page*size < a.Total}})
}

// Calls returns how many times path?query was requested.
func (a *PagedAPI) Calls(pathQuery string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[pathQuery]
}
