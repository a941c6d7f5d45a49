package paginatedapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sizes of NoETL's data sets.
const (
	// TotalItems is the number of assessments, users, events, flaky and
	// rate-limited items: four pages of 10, the last one of 5.
	TotalItems = 35
	// ItemsPerPage is the default page size.
	ItemsPerPage = 10
	// HeavyTotalItems is the number of items of /api/v1/heavy.
	HeavyTotalItems = 100
)

// Defaults of /api/v1/patient-records, each overridable per request.
const (
	// PatientMinDelay and PatientMaxDelay bound the simulated latency of
	// a page (min_delay, max_delay).
	PatientMinDelay = 2 * time.Second
	PatientMaxDelay = 4 * time.Second
	// PatientPagesMin and PatientPagesMax bound a patient's page count.
	PatientPagesMin = 2
	PatientPagesMax = 5
	// PatientPayloadKB is the target size of a page (payload_kb).
	PatientPayloadKB = 100
	// PatientRateLimit is the global limit in requests per second
	// (rate_limit).
	PatientRateLimit = 50
)

// Server is the mock API. The zero value is not usable: call [New].
type Server struct {
	mux *http.ServeMux

	mu sync.Mutex
	// calls counts requests by path.
	calls map[string]int
	// flaky counts /flaky requests by page.
	flaky map[int]int
	// limited and patients hold the request times of the rate-limited
	// and patient-records endpoints' one-second windows.
	limited, patients []time.Time
	probe             ProbeStats
}

// ProbeStats are the concurrency probe's counters, as
// /api/v1/concurrency/stats answers them.
type ProbeStats struct {
	Started   int `json:"started"`
	Completed int `json:"completed"`
	Active    int `json:"active"`
	MaxActive int `json:"max_active"`
}

// New returns a Server with no request seen.
func New() *Server {
	s := &Server{mux: http.NewServeMux(), calls: map[string]int{}, flaky: map[int]int{}}
	s.mux.HandleFunc("GET /api/v1/assessments", s.assessments)
	s.mux.HandleFunc("GET /api/v1/users", s.users)
	s.mux.HandleFunc("GET /api/v1/events", s.events)
	s.mux.HandleFunc("GET /api/v1/flaky", s.flakyPage)
	s.mux.HandleFunc("POST /api/v1/flaky/reset", s.flakyReset)
	s.mux.HandleFunc("GET /api/v1/heavy", s.heavy)
	s.mux.HandleFunc("GET /api/v1/heavy/stats", s.heavyStats)
	s.mux.HandleFunc("GET /api/v1/errors", s.errors)
	s.mux.HandleFunc("GET /api/v1/rate-limited", s.rateLimited)
	s.mux.HandleFunc("GET /api/v1/patient-records", s.patientRecords)
	s.mux.HandleFunc("POST /api/v1/concurrency/reset", s.probeReset)
	s.mux.HandleFunc("GET /api/v1/concurrency/stats", s.probeStats)
	s.mux.HandleFunc("GET /api/v1/concurrency/probe", s.probeCall)
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	return s
}

// ServeHTTP counts the request by path and answers it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls[r.URL.Path]++
	s.mu.Unlock()
	s.mux.ServeHTTP(w, r)
}

// Calls returns how many requests reached path (any method, any answer).
func (s *Server) Calls(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

// Probe returns the concurrency probe's counters.
func (s *Server) Probe() ProbeStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probe
}

// PatientPages returns how many pages of records patientID has: a value
// in [PatientPagesMin, PatientPagesMax] fixed by the id. (NoETL seeds
// Python's random with the id's MD5; the count here is as stable, not the
// same number.)
func PatientPages(patientID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(patientID))
	return PatientPagesMin + int(h.Sum32()%uint32(PatientPagesMax-PatientPagesMin+1))
}

// paging is the paging block of the page-numbered endpoints.
type paging struct {
	HasMore  bool `json:"hasMore"`
	Page     int  `json:"page"`
	PageSize int  `json:"pageSize"`
	// Total is absent from /flaky, /errors and /rate-limited, as in NoETL.
	Total *int `json:"total,omitempty"`
}

func total(n int) *int { return &n }

// window returns the bounds [lo, hi) of page (1-based) of size items out
// of n, clamped as a Python slice of a list of n would be for page ≥ 1.
func window(page, size, n int) (lo, hi int) {
	lo = min(max((page-1)*size, 0), n)
	hi = min(max(lo+size, lo), n)
	return lo, hi
}

func (s *Server) assessments(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	page, size := q.page()
	if q.done(w) {
		return
	}
	lo, hi := window(page, size, TotalItems)
	items := make([]map[string]any, 0, hi-lo)
	for i := lo + 1; i <= hi; i++ {
		items = append(items, map[string]any{"id": i, "name": fmt.Sprintf("Assessment %d", i), "score": 50 + i%50})
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": items,
		"paging": paging{HasMore: (page-1)*size+size < TotalItems, Page: page, PageSize: size, Total: total(TotalItems)}})
}

func (s *Server) users(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	offset, limit := q.int("offset", 0), q.int("limit", ItemsPerPage)
	if q.done(w) {
		return
	}
	lo := min(max(offset, 0), TotalItems)
	hi := min(max(lo+limit, lo), TotalItems)
	users := make([]map[string]any, 0, hi-lo)
	for i := lo + 1; i <= hi; i++ {
		users = append(users, map[string]any{"id": i, "username": fmt.Sprintf("user%d", i), "email": fmt.Sprintf("user%d@example.com", i)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": users, "has_more": offset+limit < TotalItems,
		"offset": offset, "limit": limit, "total": TotalItems})
}

// EncodeCursor returns the events endpoint's cursor for page: the page
// number's decimal text in standard base64, as NoETL's server makes it.
func EncodeCursor(page int) string {
	return base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(page)))
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	limit := q.int("limit", ItemsPerPage)
	if q.done(w) {
		return
	}
	// A missing or unreadable cursor starts at page 1, as in NoETL.
	page := 1
	if c := q.Get("cursor"); c != "" {
		if b, err := base64.StdEncoding.DecodeString(c); err == nil {
			if n, err := strconv.Atoi(string(b)); err == nil {
				page = n
			}
		}
	}
	lo, hi := window(page, limit, TotalItems)
	events := make([]map[string]any, 0, hi-lo)
	for i := lo + 1; i <= hi; i++ {
		events = append(events, map[string]any{"id": i, "type": "user_action",
			"timestamp": fmt.Sprintf("2024-01-%02dT12:00:00Z", i%28+1), "data": map[string]any{"action": fmt.Sprintf("event_%d", i)}})
	}
	var next *string
	if (page-1)*limit+limit < TotalItems {
		c := EncodeCursor(page + 1)
		next = &c
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": events, "next_cursor": next, "limit": limit})
}

// valuePage writes a page of {id, value} items, the body of /flaky,
// /errors and /rate-limited, with extra merged into each item.
func valuePage(page int, extra map[string]any) map[string]any {
	lo, hi := window(page, ItemsPerPage, TotalItems)
	items := make([]map[string]any, 0, hi-lo)
	for i := lo + 1; i <= hi; i++ {
		item := map[string]any{"id": i, "value": fmt.Sprintf("item_%d", i)}
		for k, v := range extra {
			item[k] = v
		}
		items = append(items, item)
	}
	return map[string]any{"data": items,
		"paging": paging{HasMore: (page-1)*ItemsPerPage+ItemsPerPage < TotalItems, Page: page, PageSize: ItemsPerPage}}
}

func (s *Server) flakyPage(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	page := q.int("page", 1)
	if q.done(w) {
		return
	}
	failing := false
	for _, p := range strings.Split(q.Get("fail_on"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil && n == page {
			failing = true
		}
	}
	s.mu.Lock()
	s.flaky[page]++
	first := s.flaky[page] == 1
	s.mu.Unlock()
	// Only the first request for a listed page fails: a retry succeeds.
	if failing && first {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"detail": "Simulated failure"})
		return
	}
	writeJSON(w, http.StatusOK, valuePage(page, nil))
}

func (s *Server) flakyReset(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	clear(s.flaky)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"status": "reset", "message": "Flaky endpoint counters cleared"})
}

var heavyCategories = [...]string{"finance", "technology", "healthcare", "education"}

// heavyItem is item id of /heavy with a payload of kb KiB. NoETL fills the
// payload and picks the category at random; here both follow from id.
func heavyItem(id, kb int) map[string]any {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	payload := make([]byte, max(kb, 0)*1024)
	for i := range payload {
		payload[i] = alphabet[(i+id)%len(alphabet)]
	}
	tags := make([]string, 5)
	for i := range tags {
		tags[i] = fmt.Sprintf("tag_%d", i)
	}
	day := id%28 + 1
	return map[string]any{
		"id": id, "name": fmt.Sprintf("Heavy Assessment %d", id), "score": 50 + id%50,
		"category": heavyCategories[id%len(heavyCategories)],
		"metadata": map[string]any{
			"created_at": fmt.Sprintf("2024-01-%02dT12:00:00Z", day), "updated_at": fmt.Sprintf("2024-01-%02dT14:30:00Z", day),
			"version": fmt.Sprintf("1.%d.0", id%10), "tags": tags,
		},
		"description": strings.Repeat(fmt.Sprintf("This is a detailed description for assessment %d. ", id), 10),
		"payload":     string(payload),
	}
}

func (s *Server) heavy(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	page, size := q.page()
	kb := q.int("payload_kb", 10)
	if q.done(w) {
		return
	}
	lo, hi := window(page, size, HeavyTotalItems)
	items := make([]map[string]any, 0, hi-lo)
	bytes := 0
	for i := lo + 1; i <= hi; i++ {
		it := heavyItem(i, kb)
		bytes += len(it["payload"].(string)) + 512
		items = append(items, it)
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": items,
		"paging": paging{HasMore: (page-1)*size+size < HeavyTotalItems, Page: page, PageSize: size, Total: total(HeavyTotalItems)},
		"meta":   map[string]any{"payload_kb_per_item": kb, "estimated_response_kb": bytes / 1024}})
}

func (s *Server) heavyStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"total_items": HeavyTotalItems, "default_payload_kb": 10,
		"max_recommended_payload_kb": 1000, "example_urls": []string{
			"/api/v1/heavy?page=1&pageSize=10&payload_kb=10",
			"/api/v1/heavy?page=1&pageSize=5&payload_kb=100",
			"/api/v1/heavy?page=1&pageSize=2&payload_kb=500",
		}})
}

// errorTimeout is how long error_type=timeout keeps the request (NoETL
// sleeps 30 seconds); the client's going away ends it sooner.
const errorTimeout = 30 * time.Second

func (s *Server) errors(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	page, retryAfter := q.int("page", 1), q.int("retry_after", 5)
	if q.done(w) {
		return
	}
	switch q.Get("error_type") {
	case "429":
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "Too Many Requests", "message": "Rate limit exceeded"})
	case "500":
		writeJSON(w, http.StatusInternalServerError, map[string]any{"detail": "Internal Server Error - simulated"})
	case "503":
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "Service Unavailable", "message": "Server temporarily unavailable"})
	case "timeout":
		if sleep(r.Context(), errorTimeout) != nil {
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{}, "simulated": "timeout"})
	case "auth":
		writeJSON(w, http.StatusUnauthorized, map[string]any{"detail": "Unauthorized - invalid credentials"})
	case "403":
		writeJSON(w, http.StatusForbidden, map[string]any{"detail": "Forbidden - insufficient permissions"})
	case "404":
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found - resource does not exist"})
	default:
		writeJSON(w, http.StatusOK, valuePage(page, nil))
	}
}

// admit records a request at now in the one-second window *times and
// reports whether it is within limit, and if not, how long until the
// oldest request leaves the window.
func admit(times *[]time.Time, now time.Time, limit int) (bool, time.Duration) {
	kept := (*times)[:0]
	for _, t := range *times {
		if now.Sub(t) < time.Second {
			kept = append(kept, t)
		}
	}
	*times = kept
	if len(kept) >= limit {
		if len(kept) == 0 {
			return false, time.Second
		}
		return false, time.Second - now.Sub(kept[0])
	}
	*times = append(kept, now)
	return true, 0
}

func (s *Server) rateLimited(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	page, rps := q.int("page", 1), q.int("requests_per_second", 2)
	if q.done(w) {
		return
	}
	s.mu.Lock()
	admitted, wait := admit(&s.limited, time.Now(), rps)
	inWindow := len(s.limited)
	s.mu.Unlock()
	if !admitted {
		// NoETL answers max(1, int(wait)+1) seconds.
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(wait.Seconds())+1)))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "Rate limit exceeded", "requests_in_window": inWindow, "limit": rps})
		return
	}
	body := valuePage(page, map[string]any{"rate_limited": true})
	body["rate_limit"] = map[string]any{"requests_in_window": inWindow, "limit": rps}
	writeJSON(w, http.StatusOK, body)
}

// patientRecords answers a FHIR-like Bundle of MedicationStatements.
//
// Inferred: NoETL's published server reads delay_min/delay_max and
// answers no meta block, while test_fetch_load.yaml sends
// min_delay/max_delay (its README: "min_delay=0&max_delay=0.2") and reads
// output.data.meta.page, meta.totalPages and entry. Both parameter
// spellings are read here, and the Bundle carries meta {page, pageSize,
// totalPages, patientId}.
func (s *Server) patientRecords(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	patient := q.Get("patientId")
	page, size := q.page()
	lo, hi := q.seconds(PatientMinDelay, "min_delay", "delay_min"), q.seconds(PatientMaxDelay, "max_delay", "delay_max")
	kb, limit := q.int("payload_kb", PatientPayloadKB), q.int("rate_limit", PatientRateLimit)
	switch {
	case q.bad != "":
	case patient == "":
		q.bad = "query parameter patientId is required"
	case page < 1 || size < 1:
		q.bad = "page and pageSize must be at least 1"
	}
	if q.done(w) {
		return
	}
	s.mu.Lock()
	admitted, _ := admit(&s.patients, time.Now(), limit)
	s.mu.Unlock()
	if !admitted {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "Too Many Requests", "message": "Rate limit exceeded"})
		return
	}
	pages := PatientPages(patient)
	base := fmt.Sprintf("/api/v1/patient-records?patientId=%s&pageSize=%d", patient, size)
	meta := map[string]any{"page": page, "pageSize": size, "totalPages": pages, "patientId": patient}
	if page > pages {
		writeJSON(w, http.StatusOK, map[string]any{"resourceType": "Bundle", "type": "searchset", "total": 0,
			"entry": []any{}, "link": []any{map[string]any{"relation": "self", "url": fmt.Sprintf("%s&page=%d", base, page)}}, "meta": meta})
		return
	}
	delay := lo
	if hi > lo {
		delay += rand.N(hi - lo)
	}
	if sleep(r.Context(), delay) != nil {
		return
	}
	// About 2 KiB of envelope; the rest of kb is spread over the entries.
	pad := strings.Repeat("x", max(0, kb*1024-2048)/size)
	entries := make([]any, 0, size)
	for i := range size {
		idx := (page-1)*size + i
		id := fmt.Sprintf("%s-p%d-e%d", patient, page, idx)
		entries = append(entries, map[string]any{"fullUrl": "urn:uuid:" + id, "resource": map[string]any{
			"resourceType": "MedicationStatement", "id": id, "status": "active",
			"subject": map[string]any{"reference": "Patient/" + patient},
			"medicationCodeableConcept": map[string]any{
				"coding": []any{map[string]any{"system": "http://www.nlm.nih.gov/research/umls/rxnorm",
					"code": strconv.Itoa(1000 + idx), "display": fmt.Sprintf("Drug %d", idx)}},
				"text": fmt.Sprintf("Medication %d", idx),
			},
			"dosage":          []any{map[string]any{"text": fmt.Sprintf("%dmg daily", (idx%3+1)*10)}},
			"effectivePeriod": map[string]any{"start": fmt.Sprintf("2024-01-%02d", idx%28+1)},
			"drugClass":       fmt.Sprintf("Class-%d", idx%10),
			"_padding":        pad,
		}})
	}
	links := []any{map[string]any{"relation": "self", "url": fmt.Sprintf("%s&page=%d", base, page)}}
	if page < pages {
		links = append(links, map[string]any{"relation": "next", "url": fmt.Sprintf("%s&page=%d", base, page+1)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"resourceType": "Bundle", "type": "searchset", "total": pages * size,
		"entry": entries, "link": links, "meta": meta})
}

// The concurrency probe is inferred from test_pagination_basic.yaml: a
// POST to reset answers {"status": "reset"}; stats answers started,
// completed, active and max_active; probe holds each request for
// delay_seconds, so that overlapping requests raise max_active above 1.

func (s *Server) probeReset(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.probe = ProbeStats{}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"status": "reset"})
}

func (s *Server) probeStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Probe())
}

func (s *Server) probeCall(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r)
	delay := q.seconds(0, "delay_seconds")
	if q.done(w) {
		return
	}
	s.mu.Lock()
	s.probe.Started++
	s.probe.Active++
	s.probe.MaxActive = max(s.probe.MaxActive, s.probe.Active)
	active := s.probe.Active
	s.mu.Unlock()
	err := sleep(r.Context(), delay)
	s.mu.Lock()
	s.probe.Active--
	if err == nil {
		s.probe.Completed++
	}
	s.mu.Unlock()
	if err != nil {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "label": q.Get("label"),
		"delay_seconds": delay.Seconds(), "active_at_start": active})
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// query reads a request's query parameters, keeping the first that does
// not parse: the handler then answers 422 (done), as FastAPI does.
type query struct {
	url.Values
	bad string
}

func newQuery(r *http.Request) *query { return &query{Values: r.URL.Query()} }

// int returns parameter name as an integer, def when absent.
func (q *query) int(name string, def int) int {
	v := q.Get(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil && q.bad == "" {
		q.bad = fmt.Sprintf("query parameter %s: %q is not an integer", name, v)
	}
	return n
}

// seconds returns the first present of names as a duration given in
// seconds, def when none is.
func (q *query) seconds(def time.Duration, names ...string) time.Duration {
	for _, name := range names {
		v := q.Get(name)
		if v == "" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if (err != nil || f < 0) && q.bad == "" {
			q.bad = fmt.Sprintf("query parameter %s: %q is not a number of seconds", name, v)
		}
		return time.Duration(f * float64(time.Second))
	}
	return def
}

// page returns page (default 1) and pageSize (default ItemsPerPage).
func (q *query) page() (page, size int) {
	return q.int("page", 1), q.int("pageSize", ItemsPerPage)
}

// done answers 422 and reports true when a parameter did not parse.
func (q *query) done(w http.ResponseWriter) bool {
	if q.bad == "" {
		return false
	}
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": q.bad})
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
