package noetlpagination

import (
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/cursorflow/cursorflow/internal/clirun"
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
	*clirun.Playbook
	api *paginatedapi.Server
}

func newFlow(t *testing.T, rel string) *flow {
	t.Helper()
	f := &flow{Playbook: clirun.New(playbook(t, rel)), api: paginatedapi.New()}
	srv := httptest.NewServer(f.api)
	t.Cleanup(srv.Close)
	f.Set("api_url", srv.URL)
	return f
}

// set overrides a workload key.
func (f *flow) set(key, value string) *flow {
	f.Set(key, value)
	return f
}

// database gives the run a PostgreSQL database of its own under each
// keychain alias and returns its DSN.
func (f *flow) database(t *testing.T, aliases ...string) string {
	t.Helper()
	return f.Database(t, "noetl_pagination", aliases...)
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
	f.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	f.set("db_host", u.Hostname()).set("db_port", u.Port()).set("db_name", u.Path[1:]).
		set("db_user", u.User.Username()).set("db_password", "'"+pw+"'")
}
