package engine_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/http"
)

// setupHTTP is setup with the http tool registered too.
func setupHTTP(t *testing.T) *bundle {
	t.Helper()
	log := eventlog.NewMemory()
	rec := &recorder{}
	reg := tools.NewRegistry()
	reg.MustRegister("rec", rec.tool())
	reg.MustRegister("http", http.New(http.Config{NoPacing: true}))
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return &bundle{log: log, eng: e, rec: rec}
}

// paginatedStep is a step that pages through the PagedAPI at workload.api,
// ten items a page, gathering the pages with strategy; then holds more
// lines of the retry rule's then block (each indented ten spaces).
func paginatedStep(name, strategy, then string) string {
	return `
  - step: ` + name + `
    tool: http
    url: '{{ api }}/items'
    params: {page: 1, pageSize: 10}
    retry:
      - when: '{{ response.paging.hasMore }}'
        then:
          next_call: {params: {page: '{{ response.paging.page + 1 }}'}}
          collect: {strategy: ` + strategy + `, path: data}
` + then
}

func issued(evs []eventlog.Event, step string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued && ev.Step == step {
			n++
		}
	}
	return n
}

func TestRetryMappingForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, retry  string
		fail         int
		wantStatus   string
		wantAttempts int
	}{
		{"max_attempts and retry_on", "{max_attempts: 3, retry_on: [error], initial_delay: 0.01}", 2, engine.StatusCompleted, 3},
		{"a number", "4", 3, engine.StatusCompleted, 4},
		{"true (defaults: 3 attempts)", "true", 2, engine.StatusCompleted, 3},
		{"exhausted", "{max_attempts: 2}", 5, engine.StatusFailed, 2},
		{"retry_when false never retries", "{max_attempts: 5, retry_when: '{{ status_code == 503 }}'}", 1, engine.StatusFailed, 1},
		{"stop_when wins", "{max_attempts: 5, stop_when: '{{ attempt >= 2 }}'}", 5, engine.StatusFailed, 2},
		{"templated max_attempts", "{max_attempts: '{{ workload.tries }}', backoff: fixed, delay: 0}", 3, engine.StatusCompleted, 4},
		{"list form on error", "[{when: '{{ error }}', then: {max_attempts: 3}}]", 2, engine.StatusCompleted, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			sum, evs := b.run(t, header+`
workload: {tries: 4}
workflow:
  - step: start
    tool:
      kind: rec
      key: call
      fail: `+strconv.Itoa(tt.fail)+`
      retry: `+tt.retry+`
`, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != tt.wantStatus {
				t.Fatalf("status %s (%s), want %s", sum.Status, sum.Error, tt.wantStatus)
			}
			if got := b.rec.count("call"); got != tt.wantAttempts {
				t.Errorf("tool called %d times, want %d", got, tt.wantAttempts)
			}
			// Each attempt is a recorded command.
			if got := issued(evs, "start"); got != tt.wantAttempts {
				t.Errorf("%d command.issued, want %d", got, tt.wantAttempts)
			}
			if tt.name == "exhausted" && !strings.Contains(sum.Error, fmt.Sprintf("after %d attempts", tt.wantAttempts)) {
				t.Errorf("error %q does not count the attempts", sum.Error)
			}
		})
	}
}

func TestRetryOnStatusAndStepLevelRetry(t *testing.T) {
	t.Parallel()
	api := testenv.NewPagedAPI(t, 5, 2)
	b := setupHTTP(t)
	sum, evs := b.run(t, header+`
workload: {api: `+api.URL+`}
workflow:
  - step: start
    tool: {kind: http, url: '{{ api }}/flaky'}
    retry: {max_attempts: 3, retry_on_status: [429, 503], backoff: exponential, backoff_seconds: 0.01}
    next: [other]
  - step: other
    tool: {kind: http, url: '{{ api }}/nothing-here-{{ 1 }}'}
    retry: {max_attempts: 3, retry_on_status: [503]}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if got := api.Calls("/flaky?"); got != 3 {
		t.Errorf("/flaky called %d times, want 3 (two 503s, then 200)", got)
	}
	if got := logtest.CountType(evs, eventlog.TypeRetryScheduled); got != 2 {
		t.Errorf("%d retry.scheduled, want 2", got)
	}
}

func TestPaginationCollectsPagesInOrder(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		strategy string
		want     func(t *testing.T, body any)
	}{
		{"append", func(t *testing.T, body any) {
			list, _ := body.([]any)
			if len(list) != 35 {
				t.Fatalf("gathered %d items, want 35", len(list))
			}
			for i, it := range list {
				if it.(map[string]any)["id"] != int64(i+1) {
					t.Fatalf("item %d is %v: pages out of order", i, it)
				}
			}
		}},
		{"collect", func(t *testing.T, body any) {
			if list, _ := body.([]any); len(list) != 4 || len(list[3].([]any)) != 5 {
				t.Fatalf("collect gathered %#v, want 4 pages (the last of 5)", body)
			}
		}},
		{"replace", func(t *testing.T, body any) {
			if list, _ := body.([]any); len(list) != 5 || list[0].(map[string]any)["id"] != int64(31) {
				t.Fatalf("replace kept %#v, want the last page", body)
			}
		}},
	} {
		t.Run(tt.strategy, func(t *testing.T) {
			t.Parallel()
			api := testenv.NewPagedAPI(t, 35, 0)
			b := setupHTTP(t)
			sum, evs := b.run(t, header+`
workload: {api: `+api.URL+`}
workflow:`+paginatedStep("start", tt.strategy, "          max_attempts: 10\n")+`    next: [count]
  - step: count
    tool: {kind: rec, key: count, n: '{{ start.data | length }}'}
`, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", sum.Status, sum.Error)
			}
			// Every page is a durable, recorded command; each page fetched once.
			if got := issued(evs, "start"); got != 4 {
				t.Errorf("%d command.issued for 4 pages", got)
			}
			for p := 1; p <= 4; p++ {
				if got := api.Calls(fmt.Sprintf("/items?page=%d&pageSize=10", p)); got != 1 {
					t.Errorf("page %d fetched %d times", p, got)
				}
			}
			res := sum.Results["start"].(map[string]any)
			tt.want(t, res["data"].(map[string]any)["data"])
		})
	}
}

// TestPaginationInsideALoop: each endpoint of the loop paginates on its
// own; every item's result is its own gathered list.
func TestPaginationInsideALoop(t *testing.T) {
	t.Parallel()
	api := testenv.NewPagedAPI(t, 25, 0)
	b := setupHTTP(t)
	sum, evs := b.run(t, header+`
workload:
  api: `+api.URL+`
  endpoints: [{size: 10}, {size: 20}]
workflow:
  - step: start
    tool: http
    url: '{{ api }}/items'
    params: {page: 1, pageSize: '{{ endpoint.size }}'}
    loop:
      collection: '{{ workload.endpoints }}'
      element: endpoint
      mode: async
    retry:
      - when: '{{ response.paging.hasMore }}'
        then:
          next_call: {params: {page: '{{ response.paging.page + 1 }}'}}
          collect: {strategy: append, path: data}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	items := sum.Results["start"].(map[string]any)["data"].([]any)
	for i, want := range []int{25, 25} {
		got := items[i].(map[string]any)["data"].([]any)
		if len(got) != want {
			t.Errorf("endpoint %d gathered %d items, want %d", i, len(got), want)
		}
	}
	if got := issued(evs, "start"); got != 3+2 {
		t.Errorf("%d commands, want 5 (3 pages of 10, 2 of 20)", got)
	}
}

// TestPaginationResumesMidway: a history cut after the second page resumes
// with the third, and the result still holds every page in order.
func TestPaginationResumesMidway(t *testing.T) {
	t.Parallel()
	api := testenv.NewPagedAPI(t, 35, 0)
	src := header + `
workload: {api: ` + api.URL + `}
workflow:` + paginatedStep("start", "append", "")
	b := setupHTTP(t)
	sum, h := b.run(t, src, nil)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("first run: %s %s", sum.Status, sum.Error)
	}
	cut := 0
	pages := 0
	for i, ev := range h {
		if ev.Type == eventlog.TypeCommandCompleted {
			if pages++; pages == 2 {
				cut = i + 1
			}
		}
	}
	log := eventlog.NewMemory()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := log.Append(ctx, append([]eventlog.Event(nil), h[:cut]...)); err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	reg.MustRegister("http", http.New(http.Config{NoPacing: true}))
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Resume(ctx, h[0].ExecutionID); err != nil {
		t.Fatal(err)
	}
	got, err := e.Wait(ctx, h[0].ExecutionID)
	if err != nil || got.Status != engine.StatusCompleted {
		t.Fatalf("resumed: %v %+v", err, got)
	}
	want := sum.Results["start"].(map[string]any)["data"].(map[string]any)["data"]
	if have := got.Results["start"].(map[string]any)["data"].(map[string]any)["data"]; !reflect.DeepEqual(have, want) {
		t.Fatalf("resumed result differs:\n%v\nwant\n%v", have, want)
	}
	if n := api.Calls("/items?page=1&pageSize=10"); n != 1 {
		t.Errorf("page 1 fetched %d times across the resume, want 1", n)
	}
}

// TestPageRetriedOnError: a page that fails is retried as that page (not
// the first), and the gathered result still has every item once.
func TestPageRetriedOnError(t *testing.T) {
	t.Parallel()
	api := testenv.NewPagedAPI(t, 35, 2)
	b := setupHTTP(t)
	sum, evs := b.run(t, header+`
workload: {api: `+api.URL+`}
workflow:
  - step: start
    tool: http
    url: '{{ api }}/flaky'
    params: {page: 1, pageSize: 10, fail_on: 3}
    retry:
      - when: '{{ output.status == "error" and status_code == 503 }}'
        then: {max_attempts: 3}
      - when: '{{ response.paging.hasMore }}'
        then:
          next_call: {params: {page: '{{ response.paging.page + 1 }}'}}
          collect: {strategy: append, path: data}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if n := api.Calls("/flaky?fail_on=3&page=3&pageSize=10"); n != 3 {
		t.Errorf("page 3 called %d times, want 3 (two 503s)", n)
	}
	if n := api.Calls("/flaky?fail_on=3&page=1&pageSize=10"); n != 1 {
		t.Errorf("page 1 called %d times, want once", n)
	}
	items := sum.Results["start"].(map[string]any)["data"].(map[string]any)["data"].([]any)
	if len(items) != 35 || items[34].(map[string]any)["id"] != int64(35) {
		t.Fatalf("gathered %d items", len(items))
	}
}
