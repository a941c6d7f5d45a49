// Package builtin registers cursorflow's built-in tools — http, postgres,
// duckdb, nats, secrets, noop, python and shell — in a tools.Registry. The engine and the
// example binaries use it; a host adds its own kinds (see package fn) to
// the same registry.
//
// python and shell run whatever code a playbook carries, and duckdb reads
// and writes any local file, with the worker's rights, so they are off
// unless Options.EnablePython, EnableShell and EnableDuckDB say otherwise:
// where strangers can submit playbooks, a worker must not hand them a
// shell. A step of a disabled kind fails with an error wrapping
// ErrDisabled that says how to enable it.
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
	"github.com/cursorflow/cursorflow/tools/duckdb"
	"github.com/cursorflow/cursorflow/tools/http"
	"github.com/cursorflow/cursorflow/tools/nats"
	"github.com/cursorflow/cursorflow/tools/noop"
	"github.com/cursorflow/cursorflow/tools/postgres"
	"github.com/cursorflow/cursorflow/tools/python"
	"github.com/cursorflow/cursorflow/tools/secrets"
	"github.com/cursorflow/cursorflow/tools/shell"
)

// Kinds are the tool kinds Register adds. duckdb, python and shell refuse
// to run unless enabled (see Options).
var Kinds = []string{"duckdb", "http", "nats", "noop", "postgres", "python", "secrets", "shell"}

// ErrDisabled is wrapped by the error a tool kind that runs code or
// touches local files (python, shell, duckdb) returns when its Options
// field did not enable it.
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
	// EnableDuckDB makes kind duckdb run SQL. Defaults to false (a duckdb
	// step fails saying so): DuckDB SQL reads and writes any local file the
	// worker can, so enable it only where everyone who may submit a
	// playbook may do that.
	EnableDuckDB bool
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
	nc := nats.New(nats.Config{Keychain: opts.Keychain})
	closer := closers{pg, nc}
	set := map[string]tools.Tool{
		"duckdb":   disabled("duckdb", "reads and writes local files", "EnableDuckDB", new(duckdb.Tool)),
		"http":     http.New(http.Config{Client: opts.HTTPClient, Keychain: opts.Keychain, Logger: logger}),
		"nats":     nc,
		"noop":     noop.New(),
		"postgres": pg,
		"python":   disabled("python", "runs code on the worker", "EnablePython", new(python.Tool)),
		"secrets":  secrets.New(opts.Keychain),
		"shell":    disabled("shell", "runs commands on the worker", "EnableShell", new(shell.Tool)),
	}
	if opts.EnablePython {
		set["python"] = python.New(python.Config{Python: opts.Python, Logger: logger})
	}
	if opts.EnableShell {
		set["shell"] = shell.New(shell.Config{Logger: logger})
	}
	if opts.EnableDuckDB {
		db := duckdb.New(duckdb.Config{Keychain: opts.Keychain})
		set["duckdb"] = db
		closer = append(closer, db)
	}
	for _, k := range Kinds {
		if _, err := r.Lookup(k); err == nil {
			_ = closer.Close()
			return nil, fmt.Errorf("builtin: %w: %q", tools.ErrDuplicateKind, k)
		}
	}
	for _, k := range Kinds {
		if err := r.Register(k, set[k]); err != nil {
			_ = closer.Close()
			return nil, err
		}
	}
	return closer, nil
}

type closers []io.Closer

func (c closers) Close() error {
	var errs []error
	for _, x := range c {
		errs = append(errs, x.Close())
	}
	return errors.Join(errs...)
}

// disabled stands in for a code-running kind that was not enabled. It
// lists the keys of the tool it stands for (real, never called), so that
// a worker's lint (engine.Lint) checks those tasks as the enabled tool's.
func disabled(kind, what, option string, real tools.ConfigKeyLister) tools.Tool {
	why := fmt.Sprintf("kind %s %s and is off here (builtin.Options.%s; "+
		"the example worker's --allow-code; the cursorflow CLI's --no-code turns it off)", kind, what, option)
	return disabledTool{tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{}, fmt.Errorf("%w: %s", ErrDisabled, why)
	}), real, why}
}

// disabledTool fails every call and lists the keys of the tool it stands
// for.
type disabledTool struct {
	tools.ToolFunc
	tools.ConfigKeyLister
	why string
}

// Disabled implements tools.Disabler: an engine running these tools
// itself refuses a playbook that uses the kind before anything runs.
func (d disabledTool) Disabled() string { return d.why }

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
