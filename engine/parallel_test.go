package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	toolhttp "github.com/cursorflow/cursorflow/tools/http"
)

// TestParallelLoopBoundsInFlight measures concurrency where it matters: at
// a real HTTP server the loop's items call.
func TestParallelLoopBoundsInFlight(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inFlight, peak, total := 0, 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		total++
		peak = max(peak, inFlight)
		mu.Unlock()
		time.Sleep(40 * time.Millisecond) // the work a real endpoint does
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"item": "` + r.URL.Query().Get("item") + `"}`))
	}))
	defer srv.Close()

	reg := tools.NewRegistry()
	reg.MustRegister("http", toolhttp.New(toolhttp.Config{}))
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	src := header + `
workload: {url: "` + srv.URL + `"}
workflow:
  - step: start
    loop:
      in: '{{ range(50) | list }}'
      iterator: item
      spec: {mode: parallel, max_in_flight: 3}
    tool:
      kind: http
      url: '{{ url }}/work'
      params: {item: '{{ iter.item }}'}
`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(src), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if total != 50 {
		t.Fatalf("server saw %d requests, want 50", total)
	}
	if peak != 3 {
		t.Fatalf("peak in flight at the server = %d, want exactly 3 (max_in_flight)", peak)
	}
	res := sum.Results["start"].(map[string]any)
	if n := len(res["data"].([]any)); n != 50 {
		t.Fatalf("aggregated %d item results, want 50", n)
	}
}
