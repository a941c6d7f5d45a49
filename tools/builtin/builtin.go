// Package builtin registers cursorflow's built-in tools — http, postgres,
// noop, python and shell — in a tools.Registry. The engine and the
// example binaries use it; a host adds its own kinds (see package fn) to
// the same registry.
//
// python and shell run whatever code a playbook carries, with the
// worker's rights, so they are off unless Options.EnablePython and
// Options.EnableShell say otherwise: where strangers can submit
// playbooks, a worker must not hand them a shell. A step of a disabled
// kind fails with an error wrapping ErrDisabled that says how to enable
// it.
//
//	reg, closer := builtin.NewRegistry(builtin.Options{})
//	defer closer.Close()
//	reg.MustRegister("enrich", fn.New(enrich))
//
// Tools resolve credentials through Call.Keychain, which the engine
// fills; Options.Keychain is only the fallback for calls that carry none.
package builtin

import (
	"context"
	"errors"
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

// Kinds are the tool kinds Register adds. python and shell refuse to run
// unless enabled (see Options).
var Kinds = []string{"http", "noop", "postgres", "python", "shell"}

// ErrDisabled is wrapped by the error a code-running tool kind (python,
// shell) returns when its Options field did not enable it.
var ErrDisabled = errors.New("builtin: tool kind disabled")

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
	// EnablePython makes kind python run code. Defaults to false: a
	// python step fails with ErrDisabled. Enable it only where everyone
	// who may submit a playbook may run code on the worker.
	EnablePython bool
	// EnableShell makes kind shell run commands. Defaults to false, like
	// EnablePython and for the same reason.
	EnableShell bool
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
		"python":   disabled("python", "EnablePython"),
		"shell":    disabled("shell", "EnableShell"),
	}
	if opts.EnablePython {
		set["python"] = python.New(python.Config{Python: opts.Python, Logger: logger})
	}
	if opts.EnableShell {
		set["shell"] = shell.New(shell.Config{Logger: logger})
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

// disabled stands in for a code-running kind that was not enabled.
func disabled(kind, option string) tools.Tool {
	return tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{}, fmt.Errorf("%w: kind %s runs code on the worker and is off here (builtin.Options.%s; "+
			"the example worker's --allow-code)", ErrDisabled, kind, option)
	})
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
