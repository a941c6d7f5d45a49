package apitest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// Timings of the server [Start] starts: short, so that tests are not
// paced by them.
const (
	// Tick is the engine's tick.
	Tick = 5 * time.Millisecond
	// KeepAlive is the API's interval between keepalive comments on event
	// streams.
	KeepAlive = 50 * time.Millisecond
	// Workers is the engine's number of in-process workers.
	Workers = 4
)

// FailMsg is the msg that makes the echo tool fail.
const FailMsg = "fail"

// Config shapes the server of [Start].
type Config struct {
	// Token is the bearer token the API requires; empty serves an open
	// API.
	Token string
	// Logger receives the engine's and the API's logs. Defaults to a text
	// logger at level Info writing to the test's output.
	Logger *slog.Logger
	// Configure, if set, adjusts the API's configuration before the
	// server starts.
	Configure func(*api.Config)
	// Engine, if set, adjusts the engine's configuration before the engine
	// is built: a test adds cursor drivers and a keychain, say. The test
	// closes what it adds.
	Engine func(*engine.Config)
}

// Server is an API server on an in-process engine. Its tools:
//
//   - echo records its msg (see [Server.Seen]) and succeeds with its
//     config as data, unless msg is [FailMsg]: then it fails.
//   - gate blocks until Gate is closed (or the command is cancelled).
type Server struct {
	// HTTP is the test server; HTTP.URL is the API's base URL.
	HTTP *httptest.Server
	// Log is the engine's event log.
	Log eventlog.Log
	// Engine is the engine behind the API.
	Engine *engine.Engine
	// Gate releases every gate tool call when closed.
	Gate chan struct{}

	mu   sync.Mutex
	msgs []string
}

// Start starts a server that is shut down when the test ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	s := &Server{Log: eventlog.NewMemory(), Gate: make(chan struct{})}
	reg := tools.NewRegistry()
	reg.MustRegister("echo", tools.ToolFunc(s.echo))
	reg.MustRegister("gate", tools.ToolFunc(s.gate))
	ecfg := engine.Config{Log: s.Log, Tools: reg, Workers: Workers, Tick: Tick, Logger: cfg.Logger}
	if cfg.Engine != nil {
		cfg.Engine(&ecfg)
	}
	e, err := engine.New(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Engine = e
	acfg := api.Config{Engine: e, Log: s.Log, Token: cfg.Token, KeepAlive: KeepAlive, Logger: cfg.Logger}
	if cfg.Configure != nil {
		cfg.Configure(&acfg)
	}
	s.HTTP = httptest.NewServer(api.New(acfg))
	t.Cleanup(func() {
		s.HTTP.Close()
		_ = e.Close()
	})
	return s
}

// URL returns the API's base URL.
func (s *Server) URL() string { return s.HTTP.URL }

// Seen returns the msg of every echo call so far, in call order.
func (s *Server) Seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}

func (s *Server) echo(_ context.Context, c *tools.Call) (tools.Output, error) {
	msg := fmt.Sprint(c.Config["msg"])
	s.mu.Lock()
	s.msgs = append(s.msgs, msg)
	s.mu.Unlock()
	if msg == FailMsg {
		return tools.Output{Status: tools.StatusError, Error: "asked to fail"}, nil
	}
	return tools.Output{Status: tools.StatusSuccess, Data: c.Config}, nil
}

func (s *Server) gate(ctx context.Context, _ *tools.Call) (tools.Output, error) {
	select {
	case <-s.Gate:
		return tools.Output{Status: tools.StatusSuccess}, nil
	case <-ctx.Done():
		return tools.Output{Status: tools.StatusError, Error: ctx.Err().Error()}, nil
	}
}
