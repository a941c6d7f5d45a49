// Package clirun runs a playbook through the cursorflow CLI in a test, as a
// user would, and reads back what the run left behind: its --json summary,
// its output and the execution's events, from a SQLite event log of its
// own. The acceptance tests of NoETL's playbooks (examples/noetlpagination,
// examples/noetlcorpus) are written with it.
package clirun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	eventsqlite "github.com/cursorflow/cursorflow/eventlog/sqlite"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// Timeout bounds one run of the CLI.
const Timeout = 2 * time.Minute

// Playbook is a playbook file, used as it is, and the command line and
// environment of its runs.
type Playbook struct {
	File string
	Args []string
	// Env is the CLI's environment; nil inherits the test's.
	Env []string
}

// New returns the playbook at file with no arguments yet.
func New(file string) *Playbook { return &Playbook{File: file} }

// Set overrides the workload key with value (--set key=value).
func (p *Playbook) Set(key, value string) *Playbook {
	p.Args = append(p.Args, "--set", key+"="+value)
	return p
}

// Credential enters value into the run's keychain under alias
// (--credential alias=value).
func (p *Playbook) Credential(alias, value string) *Playbook {
	p.Args = append(p.Args, "--credential", alias+"="+value)
	return p
}

// Database gives the run a PostgreSQL database of its own (see
// [testenv.PostgresDatabase]) under each keychain alias and returns its
// DSN.
func (p *Playbook) Database(t testing.TB, prefix string, aliases ...string) string {
	t.Helper()
	dsn := testenv.PostgresDatabase(t, prefix)
	for _, a := range aliases {
		p.Credential(a, dsn)
	}
	return dsn
}

// Exec runs the CLI with argv and the playbook's environment and returns
// its exit code, standard output and standard error.
func (p *Playbook) Exec(t testing.TB, argv ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, testenv.CLI(t), argv...)
	cmd.Env = p.Env
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("cursorflow %v: %v", argv, err)
	}
	return code, out.String(), errOut.String()
}

// Run is a finished `cursorflow run`: its summary, exit code and output,
// and the execution's events.
type Run struct {
	testenv.Summary
	Code int
	// Output is the CLI's standard output, then its standard error.
	Output string
	Events []eventlog.Event
}

// Run runs the playbook (`cursorflow run FILE --json` with the playbook's
// arguments) with a SQLite event log and a file result store in a
// temporary directory, and reads the execution's events back. The test
// fails when the CLI ends without a summary.
func (p *Playbook) Run(t testing.TB) *Run {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "events.db")
	argv := append([]string{"run", p.File, "--eventlog", "sqlite:" + logPath,
		"--result-store", "file://" + filepath.Join(dir, "results"), "--json"}, p.Args...)
	code, out, errOut := p.Exec(t, argv...) // the summary says how it ended
	r := &Run{Summary: testenv.ParseSummary(t, []byte(out)), Code: code, Output: out + errOut}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.Events = Recorded(t, ctx, logPath, r.ExecutionID)
	return r
}

// Recorded returns what the SQLite event log at path holds for execution
// id.
func Recorded(t testing.TB, ctx context.Context, path, id string) []eventlog.Event {
	t.Helper()
	log, err := eventsqlite.Open(ctx, path, eventsqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Completed fails the test unless the execution completed.
func (r *Run) Completed(t testing.TB) {
	t.Helper()
	if r.Status != "completed" {
		t.Fatalf("execution %s: %s at %s (%s): %s\n%s", r.ExecutionID, r.Status, r.FailedStep, r.FailedField, r.Error, r.Output)
	}
}

// Attempt is one finished command of a step, as its completed or failed
// event records it.
type Attempt struct {
	Failed bool
	// Data is the data of the command's output: the step's result as the
	// playbook's templates read it.
	Data  map[string]any
	Error string
}

// Attempts returns step's finished commands in the order they finished:
// the items of a loop, the attempts of a retried call.
func (r *Run) Attempts(t testing.TB, step string) []Attempt {
	t.Helper()
	var as []Attempt
	for _, ev := range r.Events {
		if ev.Step != step || (ev.Type != eventlog.TypeCommandCompleted && ev.Type != eventlog.TypeCommandFailed) {
			continue
		}
		var p struct {
			Output struct {
				Data  map[string]any `json:"data"`
				Error string         `json:"error"`
			} `json:"output"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatalf("%s: %s: %v", step, ev.Type, err)
		}
		a := Attempt{Failed: ev.Type == eventlog.TypeCommandFailed, Data: p.Output.Data, Error: p.Output.Error}
		if a.Error == "" {
			a.Error = p.Error
		}
		as = append(as, a)
	}
	return as
}

// Result returns the data of step's last completed command.
func (r *Run) Result(t testing.TB, step string) map[string]any {
	t.Helper()
	as := r.Attempts(t, step)
	for i := len(as) - 1; i >= 0; i-- {
		if !as[i].Failed {
			return as[i].Data
		}
	}
	t.Fatalf("step %s completed no command\n%s", step, r.Output)
	return nil
}

// Commands counts the commands issued for step.
func (r *Run) Commands(step string) int {
	n := 0
	for _, ev := range r.Events {
		if ev.Type == eventlog.TypeCommandIssued && ev.Step == step {
			n++
		}
	}
	return n
}

// Num reads a JSON number as a float64; anything else is -1, which no
// count equals.
func Num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
	}
	return -1
}
