package tools

import (
	"context"
	"errors"
	"log/slog"
)

// Output statuses of NoETL's envelope.
const (
	StatusSuccess = "success"
	StatusError   = "error"
)

// Output is NoETL's tool result envelope: {status, data, error}. Templates
// see it as output.status, output.data, output.error.
type Output struct {
	Status string `json:"status"`
	Data   any    `json:"data,omitempty"`
	Error  string `json:"error,omitempty"`
	// HTTP carries {status, headers} for http tools so policies can test
	// output.http.status; nil for other tools.
	HTTP map[string]any `json:"http,omitempty"`
}

// Map returns the envelope as the map templates render against.
func (o Output) Map() map[string]any {
	m := map[string]any{"status": statusValue(o.Status), "data": o.Data, "error": nil}
	if o.Error != "" {
		m["error"] = o.Error
	}
	if o.HTTP != nil {
		m["http"] = o.HTTP
	}
	return m
}

// statusValue returns s as an interface value, without allocating for
// the two statuses every call returns.
func statusValue(s string) any {
	switch s {
	case StatusSuccess:
		return StatusSuccess
	case StatusError:
		return StatusError
	}
	return s
}

// Call is one invocation of a tool.
type Call struct {
	ExecutionID string
	// CommandID identifies the unit of work across its attempts (the
	// command's base id); sub-playbooks derive their child execution id
	// from it so a retried or resumed call re-attaches to the same child.
	CommandID string
	Step      string
	// Task is the pipeline task's name, empty for a single tool.
	Task string
	Kind string
	// Config is the task's configuration with every template rendered
	// (url, params, command, code, auth, ...).
	Config map[string]any
	// Args are the step's rendered args/input, laid over the args of the
	// arc that led to the step.
	Args map[string]any
	// Scope is the render context the config was rendered against; tools
	// that pass context on (python's input_data, sub-playbooks) read it.
	Scope    map[string]any
	Attempt  int
	Keychain Keychain
	Logger   *slog.Logger
	// Await is set when the engine can park the command: a tool whose work
	// goes on in another execution (a sub-playbook) may then return an
	// *AwaitExecution instead of blocking its worker until that execution
	// ends. Unset (rows of a cursor frame), the tool waits itself.
	Await bool
	// Revealed lists the secrets the worker put into Config and Args in
	// place of secret references (see RevealSecrets), with the keychain
	// entries they came from: a tool that sends its configuration to a
	// host it is told (http) sends nothing to a host one of them does not
	// allow.
	Revealed []Revealed
	// Partial, when set, receives the call's partial results while it
	// runs; tools call EmitPartial rather than this directly. The engine
	// records each as a call.partial event, bounded in size and rate
	// (engine.PartialLimits), and never lets it block the tool.
	Partial func(data any)
}

// AwaitExecution is the error a tool returns, when Call.Await allows it,
// to free its worker while execution ExecutionID does the work: the engine
// records that the command waits for it and, once it has ended, runs the
// task again — which then finds the execution finished.
type AwaitExecution struct {
	ExecutionID string
}

// Error describes the wait.
func (a *AwaitExecution) Error() string {
	return "tools: waiting for execution " + a.ExecutionID
}

// EmitPartial hands a partial result of the running call (a page, a batch
// of rows, a line of output) to whoever watches the execution. It never
// blocks, and does nothing for a call without a Partial receiver. Data
// must be a JSON value (maps, slices, scalars) the tool no longer
// changes; the tool redacts secrets from it as it does from its Output.
func (c *Call) EmitPartial(data any) {
	if c != nil && c.Partial != nil {
		c.Partial(data)
	}
}

// Tool executes one kind of task.
//
// Failures of the work itself (HTTP 500, SQL error, Python exception) are
// reported as an Output with Status "error", so policy rules can match
// them. Execute returns an error when the call could not be made at all
// (a bad configuration, an unknown credential alias); the engine records
// it as an error Output all the same (output.error is its message), so
// policies see it too, unless it wraps ErrAborted: then the task fails at
// once, no policy rule is consulted, and in a cursor loop the loop stops.
type Tool interface {
	Execute(ctx context.Context, call *Call) (Output, error)
}

// ToolFunc adapts a function to Tool.
type ToolFunc func(ctx context.Context, call *Call) (Output, error)

// Execute calls f.
func (f ToolFunc) Execute(ctx context.Context, call *Call) (Output, error) { return f(ctx, call) }

// ErrAborted fails the task at once when the error a tool returns from
// Execute wraps it: no policy rule sees it (no retry, no jump, no continue).
// tools/fn's Abort wraps it.
var ErrAborted = errors.New("tools: call aborted")

// ErrUnknownKind is returned when no tool is registered for a kind.
var ErrUnknownKind = errors.New("tools: unknown tool kind")

// ErrCredentialNotFound is returned when a keychain has no such alias.
var ErrCredentialNotFound = errors.New("tools: credential not found")

// ErrHostNotAllowed is returned by a tool asked to send a credential to a
// host its keychain entry does not allow (see Credential.AllowsHost).
var ErrHostNotAllowed = errors.New("tools: credential not allowed for this host")
