package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// Defaults of Config.
const (
	// DefaultMaxBody bounds request bodies (4 MiB).
	DefaultMaxBody int64 = 4 << 20
	// DefaultKeepAlive is how often an idle event stream sends a comment.
	DefaultKeepAlive = 15 * time.Second
	// DefaultStreamWriteTimeout bounds each write of an event stream.
	DefaultStreamWriteTimeout = time.Minute
	// DefaultEventsLimit is the page size of GET .../events without limit.
	DefaultEventsLimit = 100
	// MaxEventsLimit is the largest page GET .../events returns.
	MaxEventsLimit = 1000
)

// ErrUnavailable is what a Runner returns (wrapped) when it cannot take
// writes, for example on a standby replica; the API answers 503.
var ErrUnavailable = errors.New("api: runner unavailable")

// Runner starts and cancels executions. *engine.Engine satisfies it.
type Runner interface {
	// Start parses src and starts an execution of it, returning its id.
	// An id returned with an error names an execution that may run (see
	// engine.Engine.Start): the API answers 503 naming it.
	Start(ctx context.Context, src []byte, opts engine.StartOptions) (string, error)
	// Cancel asks a running execution to stop.
	Cancel(ctx context.Context, executionID string) error
}

var _ Runner = (*engine.Engine)(nil)

// Config configures the handler New returns.
type Config struct {
	// Engine starts and cancels executions. Required.
	Engine Runner
	// Log is the event log executions are read from. Required.
	Log eventlog.Log
	// Projection answers status and list questions from states kept
	// current with the log's tail (see engine.Projection), so no request
	// folds a whole history. Defaults to a new engine.Projection over Log;
	// a host that also refreshes one (leader.OrchestratorConfig.Projection)
	// passes the same one here.
	Projection *engine.Projection
	// Playbooks stores registered playbooks. Defaults to a MemoryStore.
	Playbooks Store
	// Token is the bearer token every route but /healthz and /readyz
	// requires. Empty disables authentication (local development only;
	// New logs a warning).
	Token string
	// AuthFailures is how many failed authentications (a wrong bearer
	// token, a wrong dashboard login) a client address may make at once;
	// it earns one more every 3 seconds, and past its allowance it is
	// answered 429 with Retry-After, its token not looked at. Defaults to
	// DefaultAuthFailures; negative turns the limit off. Behind a reverse
	// proxy every client shares the proxy's address, and so the limit.
	AuthFailures int
	// AllowedHosts are the host names (without port) an open server
	// (no Token) answers under besides IP addresses and localhost: a
	// request naming another host in its Host header gets 403, so a web
	// page cannot reach an open server on the visitor's machine by
	// pointing its own name at 127.0.0.1 (DNS rebinding). Unused with a
	// Token, which such a page does not have.
	AllowedHosts []string
	// MaxBody bounds request bodies; larger ones get 413. Defaults to
	// DefaultMaxBody (4 MiB).
	MaxBody int64
	// Logger receives request and execution logs. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Metrics, if set, serves GET /metrics (for example a Prometheus
	// handler); without it /metrics is 404.
	Metrics http.Handler
	// Ready reports whether the server can take work; GET /readyz answers
	// 503 while it returns an error. Defaults to always ready.
	Ready func(ctx context.Context) error
	// KeepAlive is how often an idle event stream sends an SSE comment so
	// proxies keep the connection open. Defaults to 15 seconds.
	KeepAlive time.Duration
	// StreamWriteTimeout bounds each write of an event stream (a batch of
	// events, a keepalive): a client that stops reading, whose socket
	// buffers fill, has its stream ended after this long instead of
	// holding the handler for ever. Streams run longer than any
	// server-wide http.Server WriteTimeout, which they lift. Defaults to
	// one minute.
	StreamWriteTimeout time.Duration
	// Workers lists the live workers for GET /v1/workers (for example a
	// natsjs.Registry). Defaults to Engine when it is an
	// engine.WorkerLister (an *engine.Engine lists its in-process
	// workers); without either the route answers 404.
	Workers engine.WorkerLister
}

// Route is one (method, path pattern) the handler serves. Paths use
// net/http.ServeMux's wildcard syntax, which is also OpenAPI's:
// /v1/executions/{id}.
type Route struct {
	Method string
	Path   string
	// Public routes skip authentication.
	Public bool
}

// route binds a Route to its handler.
type route struct {
	Route
	handle func(s *server, w http.ResponseWriter, r *http.Request)
}

// table is the API: the single list both New and Routes read.
func table() []route {
	return []route{
		{Route{http.MethodGet, "/healthz", true}, (*server).healthz},
		{Route{http.MethodGet, "/readyz", true}, (*server).readyz},
		{Route{http.MethodGet, "/metrics", false}, (*server).metrics},
		{Route{http.MethodGet, "/openapi.yaml", false}, (*server).openapi},
		{Route{http.MethodPost, "/v1/playbooks", false}, (*server).registerPlaybook},
		{Route{http.MethodGet, "/v1/playbooks", false}, (*server).listPlaybooks},
		{Route{http.MethodGet, "/v1/playbooks/{name}", false}, (*server).getPlaybook},
		{Route{http.MethodPost, "/v1/executions", false}, (*server).startExecution},
		{Route{http.MethodGet, "/v1/executions", false}, (*server).listExecutions},
		{Route{http.MethodGet, "/v1/executions/{id}", false}, (*server).getExecution},
		{Route{http.MethodGet, "/v1/executions/{id}/playbook", false}, (*server).getExecutionPlaybook},
		{Route{http.MethodGet, "/v1/executions/{id}/events", false}, (*server).listEvents},
		{Route{http.MethodGet, "/v1/executions/{id}/events/stream", false}, (*server).streamEvents},
		{Route{http.MethodPost, "/v1/executions/{id}/cancel", false}, (*server).cancelExecution},
		{Route{http.MethodGet, "/v1/workers", false}, (*server).listWorkers},
	}
}

// Routes lists every route the handler serves, sorted by path then
// method.
func Routes() []Route {
	t := table()
	out := make([]Route, len(t))
	for i, r := range t {
		out[i] = r.Route
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

//go:embed openapi.yaml
var openapiSpec []byte

// OpenAPI returns the API's OpenAPI 3.0 document (YAML).
func OpenAPI() []byte { return append([]byte(nil), openapiSpec...) }

type server struct {
	cfg       Config
	tokenHash [32]byte
	// session is the value of the dashboard's cookie: derived from the
	// token, so the token itself never sits in a browser.
	session string
	log     *slog.Logger
	// authLimit counts failed authentications per client address (nil:
	// no limit).
	authLimit *authLimiter
}

// Validate reports the first missing or invalid field of cfg, by name.
func (cfg Config) Validate() error {
	if cfg.Engine == nil {
		return errors.New("api: Config.Engine is required")
	}
	if cfg.Log == nil {
		return errors.New("api: Config.Log is required")
	}
	if cfg.MaxBody < 0 {
		return errors.New("api: Config.MaxBody must not be negative")
	}
	return nil
}

// New returns the API as an http.Handler. A server should call
// cfg.Validate first: with an invalid cfg every route but /healthz
// answers 500 naming the problem.
func New(cfg Config) http.Handler {
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Playbooks == nil {
		cfg.Playbooks = NewMemoryStore()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if l, ok := cfg.Engine.(engine.WorkerLister); ok && cfg.Workers == nil {
		cfg.Workers = l
	}
	if cfg.Projection == nil && cfg.Log != nil {
		cfg.Projection, _ = engine.NewProjection(engine.ProjectionConfig{Log: cfg.Log, Logger: cfg.Logger})
	}
	if cfg.AuthFailures == 0 {
		cfg.AuthFailures = DefaultAuthFailures
	}
	s := &server{cfg: cfg, tokenHash: sha256.Sum256([]byte(cfg.Token)), session: sessionValue(cfg.Token), log: cfg.Logger,
		authLimit: newAuthLimiter(cfg.AuthFailures, time.Now)}
	if cfg.Token == "" {
		s.log.Warn("api: no bearer token configured; every route is open")
	}
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	public := map[string]bool{}
	for _, rt := range table() {
		h := rt.handle
		var hf http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if id := r.PathValue("id"); id != "" && !validID(id) {
				// No execution has such an id, and a database would refuse it
				// (PostgreSQL text holds no NUL byte) with a 500.
				executionNotFound(w, id)
				return
			}
			if name := r.PathValue("name"); name != "" && !validID(name) {
				// Likewise for a playbook name (see registerPlaybook).
				playbookNotFound(w, name, 0)
				return
			}
			h(s, w, r)
		})
		if !rt.Public {
			hf = s.authenticate(hf)
		}
		mux.Handle(rt.Method+" "+rt.Path, hf)
		allowed[rt.Path] = append(allowed[rt.Path], rt.Method)
		public[rt.Path] = public[rt.Path] || rt.Public
	}
	// Method-less patterns are less specific than the method ones, so they
	// catch only the methods a path does not serve: answer 405 in JSON
	// (ServeMux's own 405 and 404 are plain text).
	for path, methods := range allowed {
		allow := strings.Join(append(methods, headIfGet(methods)...), ", ")
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, path, allow))
		})
		if !public[path] {
			h = s.authenticate(h)
		}
		mux.Handle(path, h)
	}
	s.mountUI(mux)
	mux.Handle("/", s.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such route: "+r.URL.Path)
	})))
	if err := cfg.Validate(); err != nil {
		s.log.Error("api: invalid configuration", "error", err)
		inner := mux
		mux = http.NewServeMux()
		mux.Handle("GET /healthz", inner)
		mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusInternalServerError, err.Error())
		}))
	}
	return s.logRequests(mux)
}

// validID reports whether id can name an execution or a playbook: valid
// UTF-8 without control characters.
func validID(id string) bool {
	if !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

func headIfGet(methods []string) []string {
	for _, m := range methods {
		if m == http.MethodGet {
			return []string{http.MethodHead}
		}
	}
	return nil
}

// authenticate requires the bearer token, or the dashboard's session
// cookie (see ui.go). Both sides are hashed first so the comparison takes
// the same time whatever the presented token's length. A request that is
// not authenticated by its Authorization header (a browser's: by cookie,
// or by nothing when no token is configured) may change nothing unless it
// comes from the same origin: SameSite=Strict keeps the cookie off
// cross-site requests, and this check keeps a page elsewhere from
// driving an open server through the visitor's browser.
func (s *server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Token == "" && !s.allowedHost(r.Host) {
			writeError(w, http.StatusForbidden, "host not allowed: an open server answers only under an IP address, localhost or a name given in AllowedHosts (--allowed-host)")
			return
		}
		auth := r.Header.Get("Authorization")
		if auth == "" {
			if s.cfg.Token != "" && !s.validSession(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="cursorflow"`)
				writeError(w, http.StatusUnauthorized, "missing bearer token")
				return
			}
			if !safeMethod(r.Method) && !sameOrigin(r) {
				writeError(w, http.StatusForbidden, "cross-origin request refused: send the bearer token in the Authorization header")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if s.cfg.Token == "" {
			next.ServeHTTP(w, r)
			return
		}
		if s.refuseLimited(w, r) {
			return
		}
		scheme, token, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cursorflow"`)
			writeError(w, http.StatusUnauthorized, "missing bearer token")
			return
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
			s.authLimit.failed(clientAddr(r))
			w.Header().Set("WWW-Authenticate", `Bearer realm="cursorflow", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, "invalid bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allowedHost reports whether an open server answers a request for host
// (a Host header, with or without port): an IP address, localhost (and
// its subdomains, which resolve to loopback), or a name in AllowedHosts.
func (s *server) allowedHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" || net.ParseIP(host) != nil {
		return true
	}
	lower := strings.ToLower(host)
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		return true
	}
	for _, h := range s.cfg.AllowedHosts {
		if strings.EqualFold(strings.TrimSuffix(h, "."), host) {
			return true
		}
	}
	return false
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sameOrigin reports whether a browser says the request comes from a page
// of this server: Sec-Fetch-Site (every current browser sends it), else
// Origin against Host. A request with neither is not a browser's
// cross-site request (browsers send Origin on every cross-origin POST):
// command-line clients of an open server pass.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// statusRecorder remembers the status a handler wrote, for the request
// log. It forwards Flush (and everything else) through Unwrap, which
// http.ResponseController follows.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		level := slog.LevelDebug
		if rec.status >= 500 && r.URL.Path != "/readyz" {
			// A standby's /readyz answers 503 to every probe of its load
			// balancer: that is its job, not an error.
			level = slog.LevelError
		}
		attrs := []any{"method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start)}
		if id := r.PathValue("id"); id != "" {
			attrs = append(attrs, "execution_id", id)
		}
		s.log.Log(r.Context(), level, "api request", attrs...)
	})
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(r.Context()); err != nil {
			// The reason may name hosts; it goes to the log, not to an
			// unauthenticated client.
			s.log.Debug("api: not ready", "error", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// WorkerList is GET /v1/workers's answer.
type WorkerList struct {
	Workers []engine.WorkerInfo `json:"workers"`
}

func (s *server) listWorkers(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Workers == nil {
		writeError(w, http.StatusNotFound, "this server does not know its workers")
		return
	}
	ws, err := s.cfg.Workers.Workers(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ws == nil {
		ws = []engine.WorkerInfo{}
	}
	writeJSON(w, http.StatusOK, WorkerList{Workers: ws})
}

func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		writeError(w, http.StatusNotFound, "metrics are not configured")
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

func (s *server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(openapiSpec)
}
