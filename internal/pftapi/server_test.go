package pftapi

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a manually advanced clock for the rate-limit window.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type reply struct {
	status int
	header http.Header
	body   any // decoded JSON
	raw    string
}

func get(t *testing.T, h http.Handler, target string) reply {
	t.Helper()
	return do(t, h, http.MethodGet, target)
}

func do(t *testing.T, h http.Handler, method, target string) reply {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	rp := reply{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if err := json.Unmarshal(rec.Body.Bytes(), &rp.body); err != nil {
		t.Fatalf("%s %s: body %q is not JSON: %v", method, target, rp.raw, err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", method, target, ct)
	}
	return rp
}

// jsonOf round-trips v through JSON so it compares with a decoded body.
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantBody(t *testing.T, target string, got reply, wantStatus int, want any) {
	t.Helper()
	if got.status != wantStatus {
		t.Fatalf("GET %s: status %d, want %d (body %s)", target, got.status, wantStatus, got.raw)
	}
	if w := jsonOf(t, want); !reflect.DeepEqual(got.body, w) {
		t.Fatalf("GET %s:\n got %s\nwant %s", target, got.raw, mustJSON(t, w))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// h is the reference hash, computed independently of Hash: hex digest
// parsed as a base-16 integer.
func h(s string) *big.Int {
	sum := md5.Sum([]byte(s))
	n, ok := new(big.Int).SetString(hex.EncodeToString(sum[:]), 16)
	if !ok {
		panic("bad hex")
	}
	return n
}

func modOf(x *big.Int, m int64) int64 { return new(big.Int).Mod(x, big.NewInt(m)).Int64() }

func unlimited() *Server { return New(Config{RateLimit: Unlimited}) }

func TestHashGolden(t *testing.T) {
	// Values computed with Python's hashlib as a third implementation.
	tests := []struct {
		patient string
		pages   map[string]int
		value1  map[string]int64 // record value on page 1
		mds1    int
	}{
		{"1001", map[string]int{"assessments": 3, "conditions": 3, "medications": 2, "vital_signs": 1},
			map[string]int64{"assessments": 66, "conditions": 10, "medications": 47, "vital_signs": 2}, 9},
		{"P-7", map[string]int{"assessments": 2, "conditions": 2, "medications": 2, "vital_signs": 1},
			map[string]int64{"assessments": 13, "conditions": 84, "medications": 33, "vital_signs": 62}, 6},
		{"42", map[string]int{"assessments": 4, "conditions": 2, "medications": 3, "vital_signs": 1},
			map[string]int64{"assessments": 56, "conditions": 48, "medications": 51, "vital_signs": 56}, 9},
	}
	s := unlimited()
	for _, tt := range tests {
		for typ, n := range tt.pages {
			if got := PageCount(tt.patient, typ); got != n {
				t.Errorf("PageCount(%q, %q) = %d, want %d", tt.patient, typ, got, n)
			}
			rp := get(t, s, fmt.Sprintf("/api/v1/patient/%s?patientId=%s&page=1", typ, tt.patient))
			data := rp.body.(map[string]any)["data"].([]any)[0].(map[string]any)
			if v := data["value"].(float64); int64(v) != tt.value1[typ] {
				t.Errorf("%s %s page 1 value = %v, want %d", tt.patient, typ, v, tt.value1[typ])
			}
		}
		if got := MDSCount(tt.patient, 1); got != tt.mds1 {
			t.Errorf("MDSCount(%q, 1) = %d, want %d", tt.patient, got, tt.mds1)
		}
	}
	if got := PageCount("1", "unknown"); got != 0 {
		t.Errorf("PageCount of an unknown type = %d, want 0", got)
	}
}

func TestPages(t *testing.T) {
	ranges := map[string][2]int64{
		"assessments": {2, 4}, "conditions": {1, 3}, "medications": {2, 3}, "vital_signs": {1, 1},
	}
	s := unlimited()
	seen := map[string]map[int]bool{} // type -> page counts observed
	for i := range 60 {
		patient := fmt.Sprintf("%d", 1000+i)
		if i%7 == 0 {
			patient = fmt.Sprintf("pat-%d ü", i) // any string is an id
		}
		for typ, r := range ranges {
			total := int(r[0] + modOf(h(patient+":"+typ), r[1]-r[0]+1))
			if seen[typ] == nil {
				seen[typ] = map[int]bool{}
			}
			seen[typ][total] = true
			for page := 1; page <= total+1; page++ {
				target := fmt.Sprintf("/api/v1/patient/%s?patientId=%s&page=%d&pageSize=25",
					typ, url.QueryEscape(patient), page)
				rp := get(t, s, target)
				if page > total {
					wantBody(t, target, rp, http.StatusNotFound, map[string]any{"error": "page not found"})
					continue
				}
				sv := h(fmt.Sprintf("%s:%s:%d", patient, typ, page))
				rec := map[string]any{
					"id":        fmt.Sprintf("%s-%s-p%d-i0", strings.ToUpper(typ[:4]), patient, page),
					"patientId": patient,
					"dataType":  typ,
					"value":     modOf(sv, 100),
				}
				if typ == "assessments" {
					c := 5 + modOf(sv, 6)
					ids := []string{}
					for nn := int64(1); nn <= c; nn++ {
						ids = append(ids, fmt.Sprintf("MDS-%s-p%d-0-%02d", patient, page, nn))
					}
					rec["mdsAssessmentIds"] = ids
					rec["mdsCount"] = c
				}
				wantBody(t, target, rp, http.StatusOK, map[string]any{
					"data": []any{rec},
					"paging": map[string]any{
						"hasMore": page < total, "page": page, "pageSize": 1, "total": total,
					},
				})
			}
		}
	}
	// Sixty patients cover every page count of every range.
	for typ, r := range ranges {
		for n := r[0]; n <= r[1]; n++ {
			if !seen[typ][int(n)] {
				t.Errorf("%s: no patient had %d pages", typ, n)
			}
		}
	}
}

func TestDefaultPage(t *testing.T) {
	s := unlimited()
	rp := get(t, s, "/api/v1/patient/conditions?patientId=77")
	if rp.status != http.StatusOK {
		t.Fatalf("status %d", rp.status)
	}
	if p := rp.body.(map[string]any)["paging"].(map[string]any)["page"]; p != 1.0 {
		t.Fatalf("page without ?page= is %v, want 1", p)
	}
}

func TestDemographics(t *testing.T) {
	s := unlimited()
	for _, patient := range []string{"1001", "P-7", "42", "x"} {
		sv := h(patient + ":demographics")
		gender := "F"
		if modOf(sv, 2) == 0 {
			gender = "M"
		}
		want := map[string]any{
			"patientId": patient,
			"firstName": fmt.Sprintf("First%d", modOf(sv, 1000)),
			"lastName":  fmt.Sprintf("Last%d", modOf(new(big.Int).Div(sv, big.NewInt(256)), 1000)),
			"dob": fmt.Sprintf("19%d-%02d-%02d", 50+modOf(sv, 50), 1+modOf(sv, 12),
				1+modOf(new(big.Int).Div(sv, big.NewInt(16)), 28)),
			"gender": gender,
			"status": "active",
		}
		target := "/api/v1/patient/demographics?patientId=" + patient
		wantBody(t, target, get(t, s, target), http.StatusOK, want)
	}
	// Golden, from Python.
	rp := get(t, s, "/api/v1/patient/demographics?patientId=1001")
	wantBody(t, "1001", rp, http.StatusOK, map[string]any{
		"patientId": "1001", "firstName": "First884", "lastName": "Last308",
		"dob": "1984-09-07", "gender": "M", "status": "active",
	})
}

func TestMDSDetails(t *testing.T) {
	s := unlimited()
	for _, id := range []string{"MDS-1001-p1-0-01", "X", "MDS-42-p3-0-11"} {
		sv := h(id)
		var sections []any
		for i := int64(1); i <= 3; i++ {
			var qs []any
			for j := int64(1); j <= 3; j++ {
				v := modOf(new(big.Int).Add(sv, big.NewInt(10*i+j)), 5)
				qs = append(qs, map[string]any{
					"key":       fmt.Sprintf("B%d0%d", i, j),
					"responses": []any{map[string]any{"responseValue": fmt.Sprint(v)}},
				})
			}
			sections = append(sections, map[string]any{"sectionId": fmt.Sprintf("S%d", i), "questions": qs})
		}
		want := map[string]any{"rowCount": 1, "rows": []any{map[string]any{
			"assessment_id": id,
			"payload":       map[string]any{"assessmentId": id, "status": "completed", "sections": sections},
		}}}
		target := "/api/v1/pft/mds/details?assessmentId=" + id
		wantBody(t, target, get(t, s, target), http.StatusOK, want)
	}
	// Golden, from Python: (s + 10i + j) mod 5 for "X" is 0, 1, 2 per section.
	rp := get(t, s, "/api/v1/pft/mds/details?assessmentId=X")
	q := rp.body.(map[string]any)["rows"].([]any)[0].(map[string]any)["payload"].(map[string]any)["sections"].([]any)[2].(map[string]any)["questions"].([]any)[2].(map[string]any)
	if q["key"] != "B303" || q["responses"].([]any)[0].(map[string]any)["responseValue"] != "2" {
		t.Fatalf("X S3/B303 = %v, want responseValue \"2\"", q)
	}
}

func TestBadRequests(t *testing.T) {
	s := unlimited()
	tests := []struct {
		method, target string
		status         int
	}{
		{"GET", "/api/v1/pft/mds/details", 400},
		{"GET", "/api/v1/pft/mds/details?assessmentId=", 400},
		{"GET", "/api/v1/pft/mds/details?assessmentId=a,b", 400},
		{"GET", "/api/v1/pft/mds/details?assessmentId=a&assessmentId=b", 400},
		{"GET", "/api/v1/patient/assessments", 400},
		{"GET", "/api/v1/patient/assessments?patientId=1&page=0", 400},
		{"GET", "/api/v1/patient/assessments?patientId=1&page=-2", 400},
		{"GET", "/api/v1/patient/assessments?patientId=1&page=two", 400},
		{"GET", "/api/v1/patient/demographics", 400},
		{"GET", "/api/v1/patient/vital_signs?patientId=1&page=99999999999999999999", 400},
		{"GET", "/api/v1/patient/allergies?patientId=1", 404},
		{"GET", "/nope", 404},
		{"POST", "/api/v1/patient/assessments?patientId=1", 405},
		{"DELETE", "/health", 405},
	}
	for _, tt := range tests {
		rp := do(t, s, tt.method, tt.target)
		if rp.status != tt.status {
			t.Errorf("%s %s: status %d, want %d (%s)", tt.method, tt.target, rp.status, tt.status, rp.raw)
		}
		if _, ok := rp.body.(map[string]any)["error"]; !ok {
			t.Errorf("%s %s: body %s has no error", tt.method, tt.target, rp.raw)
		}
	}
}

func TestHealth(t *testing.T) {
	s := New(Config{RateLimit: 1, FailureRate: 1, Now: newFakeClock().Now})
	for range 5 { // neither throttled nor failed
		wantBody(t, "/health", get(t, s, "/health"), http.StatusOK, map[string]any{"status": "ok"})
	}
	if st := s.Stats(); st.Requests[EndpointHealth] != 5 || st.Answered[EndpointHealth] != 5 || st.RateLimited != 0 || st.Injected != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRateLimit(t *testing.T) {
	const rate = 20
	clock := newFakeClock()
	s := New(Config{RateLimit: rate, Now: clock.Now})
	targets := []string{
		"/api/v1/patient/assessments?patientId=1",
		"/api/v1/patient/demographics?patientId=1",
		"/api/v1/pft/mds/details?assessmentId=A",
		"/api/v1/patient/vital_signs?patientId=1&page=9", // a 404 still counts
	}
	ok, limited := 0, 0
	for i := range rate + 10 {
		clock.Advance(10 * time.Millisecond) // all inside one window
		rp := get(t, s, targets[i%len(targets)])
		if rp.status == http.StatusTooManyRequests {
			limited++
			if ra := rp.header.Get("Retry-After"); ra != "1" {
				t.Fatalf("Retry-After %q, want 1", ra)
			}
			wantBody(t, "429", rp, http.StatusTooManyRequests, map[string]any{"detail": "Too Many Requests"})
			continue
		}
		if limited > 0 {
			t.Fatalf("request %d admitted after a refusal within the same window", i)
		}
		ok++
	}
	if ok != rate || limited != 10 {
		t.Fatalf("%d admitted and %d refused, want %d and 10", ok, limited, rate)
	}
	// /health is never throttled.
	if rp := get(t, s, "/health"); rp.status != http.StatusOK {
		t.Fatalf("/health throttled: %d", rp.status)
	}
	st := s.Stats()
	if st.RateLimited != 10 {
		t.Fatalf("Stats.RateLimited = %d, want 10", st.RateLimited)
	}
	var answered, requests int64
	for k, v := range st.Answered {
		if k != EndpointHealth {
			answered += v
		}
	}
	for k, v := range st.Requests {
		if k != EndpointHealth {
			requests += v
		}
	}
	if answered != rate || requests != rate+10 {
		t.Fatalf("Stats answered %d requests %d, want %d and %d", answered, requests, rate, rate+10)
	}

	// The window slides: the first admission was at +10ms, the last at
	// +200ms. At +1010ms exactly the first has left the window (refusals were
	// never counted), so exactly one more request is admitted.
	clock.Advance(1010*time.Millisecond - 300*time.Millisecond)
	if rp := get(t, s, targets[0]); rp.status != http.StatusOK {
		t.Fatalf("after the oldest admission left the window: status %d", rp.status)
	}
	if rp := get(t, s, targets[0]); rp.status != http.StatusTooManyRequests {
		t.Fatalf("window should be full again: status %d", rp.status)
	}
	// A whole second later everything has left the window.
	clock.Advance(time.Second)
	for i := range rate {
		if rp := get(t, s, targets[0]); rp.status != http.StatusOK {
			t.Fatalf("fresh window, request %d: status %d", i, rp.status)
		}
	}
}

func TestRateLimitConcurrent(t *testing.T) {
	const rate = 50
	s := New(Config{Now: newFakeClock().Now}) // default rate limit
	srv := httptest.NewServer(s)
	defer srv.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	for range rate + 30 {
		wg.Go(func() {
			resp, err := http.Get(srv.URL + "/api/v1/patient/medications?patientId=9")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			counts[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if counts[200] != rate || counts[429] != 30 {
		t.Fatalf("status counts %v, want 200: %d and 429: 30", counts, rate)
	}
}

func TestUnlimited(t *testing.T) {
	s := New(Config{RateLimit: Unlimited, Now: newFakeClock().Now})
	for i := range 500 {
		if rp := get(t, s, "/api/v1/patient/demographics?patientId=1"); rp.status != http.StatusOK {
			t.Fatalf("request %d: status %d", i, rp.status)
		}
	}
}

func TestFailureInjection(t *testing.T) {
	target := "/api/v1/patient/conditions?patientId=5"
	sequence := func(seed int64) []int {
		s := New(Config{RateLimit: Unlimited, FailureRate: 0.3, Seed: seed})
		var out []int
		for range 400 {
			out = append(out, get(t, s, target).status)
		}
		st := s.Stats()
		fails := 0
		for _, c := range out {
			if c == http.StatusInternalServerError {
				fails++
			}
		}
		if int64(fails) != st.Injected || st.Answered[EndpointConditions] != int64(400-fails) {
			t.Fatalf("stats %+v disagree with %d failures", st, fails)
		}
		// 400 draws at p=0.3: mean 120, sd ~9.2; ±5 sd.
		if fails < 74 || fails > 166 {
			t.Fatalf("%d of 400 requests failed at rate 0.3", fails)
		}
		return out
	}
	a, b, c := sequence(7), sequence(7), sequence(8)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different failures")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds gave the same failures")
	}

	all := New(Config{FailureRate: 1})
	wantBody(t, target, get(t, all, target), http.StatusInternalServerError, map[string]any{"detail": "injected"})
}

func TestInjectedFailuresCountInWindow(t *testing.T) {
	s := New(Config{RateLimit: 3, FailureRate: 1, Now: newFakeClock().Now})
	codes := []int{}
	for range 5 {
		codes = append(codes, get(t, s, "/api/v1/patient/conditions?patientId=5").status)
	}
	if want := []int{500, 500, 500, 429, 429}; !reflect.DeepEqual(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}
}

func TestLatency(t *testing.T) {
	const latency = 40 * time.Millisecond
	s := New(Config{Latency: latency})
	start := time.Now()
	if rp := get(t, s, "/api/v1/patient/vital_signs?patientId=3"); rp.status != http.StatusOK {
		t.Fatalf("status %d", rp.status)
	}
	if d := time.Since(start); d < latency {
		t.Fatalf("answered after %v, want at least %v", d, latency)
	}
	// A client that leaves ends the wait.
	s = New(Config{Latency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		s.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/patient/vital_signs?patientId=3", nil).WithContext(ctx))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled request still waited for the latency")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg Config
		ok  bool
	}{
		{Config{}, true},
		{Config{FailureRate: 1, Latency: time.Second, RateLimit: -1}, true},
		{Config{FailureRate: 1.5}, false},
		{Config{FailureRate: -0.1}, false},
		{Config{FailureRate: math.NaN()}, false},
		{Config{Latency: -time.Second}, false},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("Validate(%+v) = %v", tt.cfg, err)
		}
	}
	// New clamps instead of failing: FailureRate 7 means every request fails.
	s := New(Config{FailureRate: 7, Latency: -time.Second})
	if rp := get(t, s, "/api/v1/patient/conditions?patientId=1"); rp.status != http.StatusInternalServerError {
		t.Fatalf("status %d", rp.status)
	}
	if rp := get(t, New(Config{FailureRate: math.NaN()}), "/api/v1/patient/conditions?patientId=1"); rp.status != http.StatusOK {
		t.Fatalf("NaN failure rate: status %d", rp.status)
	}
}
