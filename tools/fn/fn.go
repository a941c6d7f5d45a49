// Package fn turns a host's Go function into a cursorflow tool, the way
// an embedding service adds its own task kinds:
//
//	reg.MustRegister("enrich", fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
//		return lookup(ctx, call.Args["id"])
//	}))
//
// A playbook then uses `tool: {kind: enrich, ...}` like any built-in tool.
// The function's value becomes Output.Data (a tools.Output is passed
// through unchanged, for functions that want full control); a returned
// error becomes an error Output, so the task's policy rules can retry or
// route on it. A function that must stop the step without policy
// involvement returns an error wrapped by Abort. A value the log cannot
// record as JSON (one holding a channel, a func or a complex number, or
// holding itself) fails the step with an error saying where in the value
// it is, rather than being dropped; NaN and ±Inf, which JSON has no
// numbers for, are recorded as the strings "NaN", "+Inf" and "-Inf". In
// a cursor loop a row's result is not recorded at all (only its outcome),
// so it is checked only where a set: or a template of the row reads it.
package fn

import (
	"context"
	"errors"
	"fmt"

	"github.com/cursorflow/cursorflow/tools"
)

// Func is the signature of a host function usable as a tool.
type Func func(ctx context.Context, call *tools.Call) (any, error)

// abortError marks an error that Execute returns instead of reporting.
type abortError struct{ err error }

func (e abortError) Error() string { return e.err.Error() }
func (e abortError) Unwrap() error { return e.err }

// Is makes an aborted call's error match tools.ErrAborted.
func (e abortError) Is(target error) bool { return target == tools.ErrAborted }

// Abort wraps err so that the tool returns it from Execute, marked
// tools.ErrAborted, instead of reporting an error Output: the task fails
// at once with err's message, and no policy rule sees it (a cursor loop
// stops).
func Abort(err error) error {
	if err == nil {
		return nil
	}
	return abortError{err}
}

// Tool adapts a Func to tools.Tool.
type Tool struct {
	f       Func
	secrets bool
}

// New returns a tool that calls f. It takes no secrets (see WithSecrets).
func New(f Func) Tool { return Tool{f: f} }

// WithSecrets returns the tool taking secrets (tools.SecretTaker): secret
// references in its configuration reach the function revealed, and its
// step args do too. Use it for a function that sends a secret no further
// than its keychain entry allows and returns nothing computed from it; the
// engine conceals only exact copies of a secret in what it returns.
func (t Tool) WithSecrets() Tool { t.secrets = true; return t }

// TakesSecrets implements tools.SecretTaker.
func (t Tool) TakesSecrets() bool { return t.secrets }

// Execute calls the function. A panic in it is recovered and returned as
// an error naming the kind, so one faulty function cannot take the
// worker down.
func (t Tool) Execute(ctx context.Context, call *tools.Call) (out tools.Output, err error) {
	if t.f == nil {
		return tools.Output{}, errors.New("fn: nil function")
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = tools.Output{}, fmt.Errorf("fn: kind %q panicked: %v", call.Kind, r)
		}
	}()
	v, ferr := t.f(ctx, call)
	if ferr != nil {
		var ab abortError
		if errors.As(ferr, &ab) {
			return tools.Output{}, ab
		}
		return tools.Output{Status: tools.StatusError, Error: ferr.Error()}, nil
	}
	switch v := v.(type) {
	case tools.Output:
		if v.Status == "" {
			v.Status = tools.StatusSuccess
		}
		return v, nil
	case *tools.Output:
		if v == nil {
			return tools.Output{Status: tools.StatusSuccess}, nil
		}
		o := *v
		if o.Status == "" {
			o.Status = tools.StatusSuccess
		}
		return o, nil
	}
	return tools.Output{Status: tools.StatusSuccess, Data: v}, nil
}
