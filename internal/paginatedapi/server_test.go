package paginatedapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

func get(t *testing.T, srv *httptest.Server, method, path string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, body
}

func TestPaginationStyles(t *testing.T) {
	srv := httptest.NewServer(New())
	defer srv.Close()

	// Page numbers: 35 items over 4 pages, hasMore false on the last.
	var ids []float64
	for page := 1; ; page++ {
		_, _, b := get(t, srv, "GET", "/api/v1/assessments?page="+strconv.Itoa(page)+"&pageSize=10")
		for _, it := range b["data"].([]any) {
			ids = append(ids, it.(map[string]any)["id"].(float64))
		}
		if !b["paging"].(map[string]any)["hasMore"].(bool) {
			if page != 4 {
				t.Fatalf("assessments ended at page %d", page)
			}
			break
		}
	}
	if len(ids) != TotalItems || ids[0] != 1 || ids[34] != 35 {
		t.Fatalf("assessments: %v", ids)
	}

	// Offsets.
	n := 0
	for offset := 0; ; offset += 10 {
		_, _, b := get(t, srv, "GET", "/api/v1/users?offset="+strconv.Itoa(offset)+"&limit=10")
		n += len(b["users"].([]any))
		if !b["has_more"].(bool) {
			break
		}
	}
	if n != TotalItems {
		t.Fatalf("users: %d", n)
	}

	// Cursors: next_cursor is null on the last page.
	n, hops, cursor := 0, 0, ""
	for {
		_, _, b := get(t, srv, "GET", "/api/v1/events?limit=10&cursor="+cursor)
		n += len(b["events"].([]any))
		hops++
		next, _ := b["next_cursor"].(string)
		if next == "" {
			if b["next_cursor"] != nil {
				t.Fatalf("last next_cursor %v, want null", b["next_cursor"])
			}
			break
		}
		cursor = next
	}
	if n != TotalItems || hops != 4 || EncodeCursor(2) != "Mg==" {
		t.Fatalf("events: %d over %d pages", n, hops)
	}
}

func TestFlakyFailsOnceAndResets(t *testing.T) {
	srv := httptest.NewServer(New())
	defer srv.Close()
	// Page 1 is not listed; page 2 fails on its first request only.
	for i, c := range []struct {
		page string
		want int
	}{{"1", 200}, {"2", 500}, {"2", 200}} {
		if code, _, _ := get(t, srv, "GET", "/api/v1/flaky?fail_on=2&page="+c.page); code != c.want {
			t.Fatalf("request %d (page %s): %d, want %d", i, c.page, code, c.want)
		}
	}
	if code, _, b := get(t, srv, "POST", "/api/v1/flaky/reset"); code != 200 || b["status"] != "reset" {
		t.Fatalf("reset: %d %v", code, b)
	}
	if code, _, b := get(t, srv, "GET", "/api/v1/flaky?fail_on=2&page=2"); code != 500 || b["detail"] != "Simulated failure" {
		t.Fatalf("after reset: %d %v", code, b)
	}
}

func TestRateLimitedAndErrors(t *testing.T) {
	srv := httptest.NewServer(New())
	defer srv.Close()
	if code, _, _ := get(t, srv, "GET", "/api/v1/rate-limited?page=1&requests_per_second=1"); code != 200 {
		t.Fatalf("first: %d", code)
	}
	code, h, b := get(t, srv, "GET", "/api/v1/rate-limited?page=2&requests_per_second=1")
	if code != 429 || h.Get("Retry-After") == "" || b["limit"] != 1.0 {
		t.Fatalf("second: %d %v %v", code, h, b)
	}
	for typ, want := range map[string]int{"auth": 401, "403": 403, "404": 404, "500": 500, "503": 503, "429": 429, "": 200} {
		if code, _, _ := get(t, srv, "GET", "/api/v1/errors?error_type="+typ); code != want {
			t.Errorf("error_type=%q: %d, want %d", typ, code, want)
		}
	}
	if code, _, _ := get(t, srv, "GET", "/api/v1/assessments?page=x"); code != 422 {
		t.Errorf("page=x: %d, want 422", code)
	}
}

func TestHeavyAndPatientRecords(t *testing.T) {
	srv := httptest.NewServer(New())
	defer srv.Close()
	_, _, b := get(t, srv, "GET", "/api/v1/heavy?page=20&pageSize=5&payload_kb=2")
	items := b["data"].([]any)
	if len(items) != 5 || len(items[0].(map[string]any)["payload"].(string)) != 2048 || b["paging"].(map[string]any)["hasMore"] != false {
		t.Fatalf("heavy last page: %d items, paging %v", len(items), b["paging"])
	}

	pages := PatientPages("P-0001")
	if pages < PatientPagesMin || pages > PatientPagesMax {
		t.Fatalf("P-0001 has %d pages", pages)
	}
	for page := 1; page <= pages+1; page++ {
		_, _, b := get(t, srv, "GET", "/api/v1/patient-records?patientId=P-0001&pageSize=10&min_delay=0&max_delay=0&payload_kb=4&page="+strconv.Itoa(page))
		meta := b["meta"].(map[string]any)
		entries := b["entry"].([]any)
		if meta["totalPages"] != float64(pages) || meta["page"] != float64(page) {
			t.Fatalf("page %d: meta %v", page, meta)
		}
		if (page <= pages) != (len(entries) == 10) {
			t.Fatalf("page %d of %d: %d entries", page, pages, len(entries))
		}
	}
	// Past the rate limit: 429 with Retry-After: 1.
	code, h, _ := get(t, srv, "GET", "/api/v1/patient-records?patientId=P-1&min_delay=0&max_delay=0&payload_kb=1&rate_limit=0")
	if code != 429 || h.Get("Retry-After") != "1" {
		t.Fatalf("rate_limit=0: %d %v", code, h)
	}
}

func TestConcurrencyProbeCountsOverlap(t *testing.T) {
	api := New()
	srv := httptest.NewServer(api)
	defer srv.Close()
	var wg sync.WaitGroup
	for _, delay := range []string{"0.3", "0", "0", "0"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := srv.Client().Get(srv.URL + "/api/v1/concurrency/probe?label=t&delay_seconds=" + delay)
			if err == nil {
				resp.Body.Close()
			}
		}()
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	st := api.Probe()
	if st.Started != 4 || st.Completed != 4 || st.Active != 0 || st.MaxActive < 2 {
		t.Fatalf("probe stats %+v", st)
	}
	if code, _, b := get(t, srv, "POST", "/api/v1/concurrency/reset"); code != 200 || b["status"] != "reset" || api.Probe() != (ProbeStats{}) {
		t.Fatalf("reset: %d %v %+v", code, b, api.Probe())
	}
}
