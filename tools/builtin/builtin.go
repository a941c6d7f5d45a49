// Package builtin registers cursorflow's built-in tools — http, postgres,
// noop, python and shell — in a tools.Registry. The engine and the
// example binaries use it; a host adds its own kinds (see package fn) to
// the same registry.
//
//	reg, closer := builtin.NewRegistry(builtin.Options{})
//	defer closer.Close()
//	reg.MustRegister("enrich", fn.New(enrich))
//
// Tools resolve credentials through Call.Keychain, which the engine
// fills; Options.Keychain is only the fallback for calls that carry none.
package builtin

import (
	"fmt"
	"io"
	"log/slog"
	nethttp "net/http"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/http"
	"github.com/cursorflow/cursorflow/tools/noop"
	"github.com/cursorflow/cursorflow/tools/postgres"
	"github.com/cursorflow/cursorflow/tools/python"
	"github.com/cursorflow/cursorflow/tools/shell"
)

// Kinds are the tool kinds Register adds.
var Kinds = []string{"http", "noop", "postgres", "python", "shell"}

// Options configures the built-in tools.
type Options struct {
	// Keychain resolves credential aliases for calls whose Call.Keychain
	// is nil. Optional.
	Keychain tools.Keychain
	// HTTPClient is shared by every http call. Defaults to
	// http.NewClient() (a Transport tuned for many calls to few hosts).
	HTTPClient *nethttp.Client
	// Python is the interpreter the python tool runs. Defaults to
	// python.DefaultPython ("python3").
	Python string
	// Logger is the tools' fallback logger. Defaults to slog.Default().
	Logger *slog.Logger
}

// Register adds the built-in tools to r and returns a Closer that releases
// their resources (the postgres pools). It fails when one of Kinds is
// already registered; nothing is registered then.
func Register(r *tools.Registry, opts Options) (io.Closer, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	pg := postgres.New(postgres.Config{Keychain: opts.Keychain, Logger: logger})
	set := map[string]tools.Tool{
		"http":     http.New(http.Config{Client: opts.HTTPClient, Keychain: opts.Keychain, Logger: logger}),
		"noop":     noop.New(),
		"postgres": pg,
		"python":   python.New(python.Config{Python: opts.Python, Logger: logger}),
		"shell":    shell.New(shell.Config{Logger: logger}),
	}
	for _, k := range Kinds {
		if _, err := r.Lookup(k); err == nil {
			pg.Close()
			return nil, fmt.Errorf("builtin: %w: %q", tools.ErrDuplicateKind, k)
		}
	}
	for _, k := range Kinds {
		if err := r.Register(k, set[k]); err != nil {
			pg.Close()
			return nil, err
		}
	}
	return pg, nil
}

// NewRegistry returns a registry holding the built-in tools and the Closer
// that releases their resources.
func NewRegistry(opts Options) (*tools.Registry, io.Closer) {
	r := tools.NewRegistry()
	c, err := Register(r, opts)
	if err != nil {
		// A fresh registry has no kinds: Register cannot fail here.
		panic(err)
	}
	return r, c
}
