package http_test

import (
	"context"
	nethttp "net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/internal/pftapi"
	"github.com/cursorflow/cursorflow/tools"
	toolhttp "github.com/cursorflow/cursorflow/tools/http"
)

// TestPacingAfter429 sends requests as fast as it can to a server that
// admits 20 per sliding second: after the first 429 the tool must learn
// the limit and stop being refused.
func TestPacingAfter429(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		noPacing   bool
		concurrent int
	}{
		{"sequential", false, 1},
		{"concurrent", false, 4},
		{"off", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := pftapi.New(pftapi.Config{RateLimit: 20})
			srv := httptest.NewServer(api)
			defer srv.Close()
			tool := toolhttp.New(toolhttp.Config{NoPacing: tc.noPacing})
			const total = 50
			var mu sync.Mutex
			ok, refused := 0, 0
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < tc.concurrent; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						mu.Lock()
						finished := ok >= total || (tc.noPacing && refused > 0)
						mu.Unlock()
						if finished {
							return
						}
						out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{
							"url": srv.URL + "/api/v1/patient/demographics", "params": map[string]any{"patientId": "7"}}})
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if out.Status == tools.StatusSuccess {
							ok++
						} else if out.HTTP["status"] == nethttp.StatusTooManyRequests {
							refused++
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			if tc.noPacing {
				if refused == 0 {
					t.Fatalf("without pacing the server refused nothing: the test server does not throttle")
				}
				return
			}
			if refused > tc.concurrent {
				t.Fatalf("%d requests refused with 429, want at most %d (the one that teaches the limit, per sender)", refused, tc.concurrent)
			}
			// 50 admitted at 20 per second need at least two full windows.
			if elapsed < 2*time.Second {
				t.Fatalf("%d requests admitted in %v: faster than the server's limit allows", ok, elapsed)
			}
		})
	}
}
