package noetlpagination

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/eventlog"
	eventsqlite "github.com/cursorflow/cursorflow/eventlog/sqlite"
	"github.com/cursorflow/cursorflow/internal/paginatedapi"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// playbook returns the path of NoETL's pagination playbook rel (under
// noetl-playbooks/pagination of the shared corpus), used as it is.
func playbook(t *testing.T, rel string) string {
	t.Helper()
	return filepath.Join(testenv.SharedDir(t), "noetl-playbooks", "pagination", rel)
}

// flow is one run of a playbook against a mock API of its own.
type flow struct {
	api  *paginatedapi.Server
	url  string
	file string
	args []string
	env  []string
}

func newFlow(t *testing.T, rel string) *flow {
	t.Helper()
	f := &flow{api: paginatedapi.New(), file: playbook(t, rel)}
	srv := httptest.NewServer(f.api)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	f.set("api_url", f.url)
	return f
}

// set overrides a workload key.
func (f *flow) set(key, value string) *flow {
	f.args = append(f.args, "--set", key+"="+value)
	return f
}

// database gives the run a PostgreSQL database of its own under each
// keychain alias and returns its DSN.
func (f *flow) database(t *testing.T, aliases ...string) string {
	t.Helper()
	dsn := testenv.PostgresDatabase(t, "noetl_pagination")
	for _, a := range aliases {
		f.args = append(f.args, "--credential", a+"="+dsn)
	}
	return dsn
}

// psycopg2 sets up the python tasks that connect to PostgreSQL themselves
// (with psycopg2, from the workload's db_* keys): a python3 that imports
// psycopg2 first on the CLI's PATH, and the database's coordinates.
func (f *flow) psycopg2(t *testing.T, dsn string) {
	t.Helper()
	bin := t.TempDir()
	if err := os.Symlink(testenv.Psycopg2Python(t), filepath.Join(bin, "python3")); err != nil {
		t.Fatal(err)
	}
	f.env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	f.set("db_host", u.Hostname()).set("db_port", u.Port()).set("db_name", u.Path[1:]).
		set("db_user", u.User.Username()).set("db_password", "'"+pw+"'")
}

// run is a finished `cursorflow run`: its summary, its output and the
// execution's events, read back from the run's SQLite event log.
type run struct {
	testenv.Summary
	output string
	events []eventlog.Event
}

func (f *flow) run(t *testing.T) *run {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "events.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append([]string{"run", f.file, "--eventlog", "sqlite:" + logPath,
		"--result-store", "file://" + filepath.Join(dir, "results"), "--json"}, f.args...)
	cmd := exec.CommandContext(ctx, testenv.CLI(t), argv...)
	cmd.Env = f.env
	out, _ := cmd.CombinedOutput() // the summary says how it ended
	r := &run{Summary: testenv.ParseSummary(t, out), output: string(out)}
	log, err := eventsqlite.Open(ctx, logPath, eventsqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if r.events, err = log.Read(ctx, r.ExecutionID, 0, 0); err != nil {
		t.Fatal(err)
	}
	return r
}

// completed fails the test unless the execution completed.
func (r *run) completed(t *testing.T) {
	t.Helper()
	if r.Status != "completed" {
		t.Fatalf("execution %s: %s at %s (%s): %s\n%s", r.ExecutionID, r.Status, r.FailedStep, r.FailedField, r.Error, r.output)
	}
}

// result returns the data of step's last completed command: the step's
// result as the playbook's templates read it.
func (r *run) result(t *testing.T, step string) map[string]any {
	t.Helper()
	for i := len(r.events) - 1; i >= 0; i-- {
		ev := r.events[i]
		if ev.Type != eventlog.TypeCommandCompleted || ev.Step != step {
			continue
		}
		var p struct {
			Output struct {
				Data map[string]any `json:"data"`
			} `json:"output"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatalf("%s: command.completed: %v", step, err)
		}
		return p.Output.Data
	}
	t.Fatalf("step %s completed no command\n%s", step, r.output)
	return nil
}

// commands counts the commands issued for step.
func (r *run) commands(step string) int {
	n := 0
	for _, ev := range r.events {
		if ev.Type == eventlog.TypeCommandIssued && ev.Step == step {
			n++
		}
	}
	return n
}

// query runs a one-row query against dsn and scans it into dest.
func query(t *testing.T, dsn, q string, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, q).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// num reads a JSON number as a float64; anything else is -1, which no
// count equals.
func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case json.Number:
		f, err := x.Float64()
		if err == nil {
			return f
		}
	}
	return -1
}
