package pftapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultRateLimit is the number of requests the sliding window admits when
// Config.RateLimit is zero; the reference service's default.
const DefaultRateLimit = 50

// Unlimited is the Config.RateLimit that turns throttling off.
const Unlimited = -1

// Window is the length of the sliding rate-limit window.
const Window = time.Second

// Endpoint names, the keys of [Stats] maps.
const (
	EndpointAssessments  = TypeAssessments
	EndpointConditions   = TypeConditions
	EndpointMedications  = TypeMedications
	EndpointVitalSigns   = TypeVitalSigns
	EndpointDemographics = "demographics"
	EndpointMDSDetails   = "mds_details"
	EndpointHealth       = "health"
)

// ErrInvalidConfig is wrapped by [Config.Validate]'s errors.
var ErrInvalidConfig = errors.New("pftapi: invalid config")

// Config configures a [Server]. The zero value is the reference service: 50
// requests per second, no injected failures, no added latency.
type Config struct {
	// RateLimit is how many requests (over all endpoints except /health) one
	// sliding window of one second admits; further requests get 429 and are
	// not counted. Defaults to DefaultRateLimit (50) when zero; a negative
	// value (Unlimited) turns throttling off.
	RateLimit int

	// FailureRate is the fraction, in [0, 1], of admitted requests answered
	// 500 {"detail":"injected"} instead of their data. Defaults to 0.
	FailureRate float64

	// Latency is added before every admitted request is answered (the wait
	// ends early if the client goes away). Defaults to 0.
	Latency time.Duration

	// Seed seeds the random source that picks the injected failures: the
	// same seed and the same order of requests give the same failures.
	// Defaults to 0, itself a fixed seed.
	Seed int64

	// Now is the clock of the rate-limit window. Defaults to time.Now; tests
	// inject a fake clock.
	Now func() time.Time

	// Logger receives a debug record per refused or failed request. Defaults
	// to a logger that discards everything.
	Logger *slog.Logger
}

// Validate reports a field outside its domain, naming the field.
func (c Config) Validate() error {
	if c.FailureRate < 0 || c.FailureRate > 1 || c.FailureRate != c.FailureRate {
		return fmt.Errorf("%w: FailureRate %v is outside [0, 1]", ErrInvalidConfig, c.FailureRate)
	}
	if c.Latency < 0 {
		return fmt.Errorf("%w: Latency %v is negative", ErrInvalidConfig, c.Latency)
	}
	return nil
}

// Stats counts a server's requests since it was created.
type Stats struct {
	// Requests counts every request per endpoint, refused or not.
	Requests map[string]int64
	// Answered counts, per endpoint, the requests that got the endpoint's
	// own answer (200, or 400/404 for bad input): neither 429 nor 500.
	Answered map[string]int64
	// RateLimited counts 429 answers.
	RateLimited int64
	// Injected counts injected 500 answers.
	Injected int64
}

// Server is the API's http.Handler. It is safe for concurrent use.
type Server struct {
	limit       int
	failureRate float64
	latency     time.Duration
	now         func() time.Time
	log         *slog.Logger

	mu       sync.Mutex
	window   []time.Time // admission times inside the window, oldest first
	rng      *rand.Rand
	requests map[string]int64
	answered map[string]int64
	limited  int64
	injected int64
}

// New returns a Server for cfg. Fields outside their domain (see
// [Config.Validate]) are clamped: FailureRate into [0, 1], a negative
// Latency to 0.
func New(cfg Config) *Server {
	s := &Server{
		limit:       cfg.RateLimit,
		failureRate: min(max(cfg.FailureRate, 0), 1),
		latency:     max(cfg.Latency, 0),
		now:         cfg.Now,
		log:         cfg.Logger,
		rng:         rand.New(rand.NewPCG(uint64(cfg.Seed), 0x9e3779b97f4a7c15)),
		requests:    make(map[string]int64),
		answered:    make(map[string]int64),
	}
	if cfg.FailureRate != cfg.FailureRate { // NaN
		s.failureRate = 0
	}
	if s.limit == 0 {
		s.limit = DefaultRateLimit
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		Requests:    make(map[string]int64, len(s.requests)),
		Answered:    make(map[string]int64, len(s.answered)),
		RateLimited: s.limited,
		Injected:    s.injected,
	}
	for k, v := range s.requests {
		st.Requests[k] = v
	}
	for k, v := range s.answered {
		st.Answered[k] = v
	}
	return st
}

// route maps a path to its endpoint name, or "" when there is none.
func route(path string) string {
	switch path {
	case "/health":
		return EndpointHealth
	case "/api/v1/pft/mds/details":
		return EndpointMDSDetails
	case "/api/v1/patient/demographics":
		return EndpointDemographics
	}
	if t, ok := strings.CutPrefix(path, "/api/v1/patient/"); ok {
		if _, _, known := pageRange(t); known {
			return t
		}
	}
	return ""
}

// verdict is what admission decided for one request.
type verdict int

const (
	admitted verdict = iota
	refused
	failed
)

// admit counts the request and applies the rate limit and fault injection.
func (s *Server) admit(endpoint string) verdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[endpoint]++
	if endpoint == EndpointHealth {
		s.answered[endpoint]++
		return admitted
	}
	if s.limit > 0 {
		now := s.now()
		cut := 0
		for cut < len(s.window) && !s.window[cut].After(now.Add(-Window)) {
			cut++
		}
		s.window = s.window[cut:]
		if len(s.window) >= s.limit {
			s.limited++
			return refused
		}
		s.window = append(s.window, now)
	}
	if s.failureRate > 0 && s.rng.Float64() < s.failureRate {
		s.injected++
		return failed
	}
	s.answered[endpoint]++
	return admitted
}

// ServeHTTP answers one request; see the package documentation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	endpoint := route(r.URL.Path)
	if endpoint == "" {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
		return
	}
	switch s.admit(endpoint) {
	case refused:
		s.log.Debug("pftapi: rate limited", "endpoint", endpoint)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"detail": "Too Many Requests"})
		return
	case failed:
		s.log.Debug("pftapi: injected failure", "endpoint", endpoint)
		s.wait(r)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": "injected"})
		return
	}
	if endpoint != EndpointHealth {
		s.wait(r)
	}
	status, body := answer(endpoint, r)
	writeJSON(w, status, body)
}

// wait adds the configured latency, ending early when the client leaves.
func (s *Server) wait(r *http.Request) {
	if s.latency <= 0 {
		return
	}
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// badRequest is a 400 answer.
func badRequest(msg string) (int, any) {
	return http.StatusBadRequest, map[string]string{"error": msg}
}

// answer computes an admitted request's status and body.
func answer(endpoint string, r *http.Request) (int, any) {
	q := r.URL.Query()
	switch endpoint {
	case EndpointHealth:
		return http.StatusOK, map[string]string{"status": "ok"}
	case EndpointMDSDetails:
		ids := q["assessmentId"]
		if len(ids) != 1 || ids[0] == "" || strings.Contains(ids[0], ",") {
			return badRequest("exactly one assessmentId is required")
		}
		return http.StatusOK, mdsDetailsOf(ids[0])
	}
	patientID := q.Get("patientId")
	if patientID == "" {
		return badRequest("patientId is required")
	}
	if endpoint == EndpointDemographics {
		return http.StatusOK, demographicsOf(patientID)
	}
	page := 1
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return badRequest("page must be an integer >= 1")
		}
		page = n
	}
	total := PageCount(patientID, endpoint)
	if page > total {
		return http.StatusNotFound, map[string]string{"error": "page not found"}
	}
	return http.StatusOK, pageOf(patientID, endpoint, page, total)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil { // unreachable: every body is a plain struct or map of strings
		http.Error(w, `{"error":"internal"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
