package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/cursor"
	pgdriver "github.com/cursorflow/cursorflow/drivers/postgres"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/apitest"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// rowQueue creates the table q of 50 pending rows in a fresh schema and
// returns the schema's DSN and a connection to it.
func rowQueue(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	dsn := testenv.PostgresSchema(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	// t.Context is cancelled before cleanups run.
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), `CREATE TABLE q (id int PRIMARY KEY, status text NOT NULL DEFAULT 'pending');
		INSERT INTO q (id) SELECT generate_series(1, 50)`); err != nil {
		t.Fatal(err)
	}
	return dsn, conn
}

// drainPlaybook drains q with a cursor loop whose body is tool (the YAML
// after "tool:").
func drainPlaybook(tool string) string {
	return `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: drain}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          WITH c AS (SELECT id FROM q WHERE status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
          UPDATE q SET status = 'claimed' FROM c WHERE q.id = c.id RETURNING q.id
      iterator: job
      spec: {mode: cursor, max_in_flight: 2, frame: {max_rows: 10}}
    tool:` + tool + "\n"
}

// TestRunSaysWhichRowsFailed: a cursor loop whose body fails for some rows
// completes (the rows' failures are theirs, not the step's), and run says
// so: how many rows failed, on the terminal and in --json, rather than a
// bare "completed" that hides them. The cursor has no release statement,
// so the failed rows stay claimed in the table: run says that too, as it
// does when a release statement fails (it used to say only "7 failed").
func TestRunSaysWhichRowsFailed(t *testing.T) {
	ctx := context.Background()
	dsn, conn := rowQueue(t)
	dir := t.TempDir()
	pb := filepath.Join(dir, "drain.yaml")
	src := drainPlaybook(`
      kind: postgres
      auth: pg
      command: "UPDATE q SET status = CASE WHEN id % 7 = 0 THEN (1/(id - id))::text ELSE 'done' END WHERE id = {{ iter.job.id }}"`)
	if err := os.WriteFile(pb, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, asJSON := range []bool{false, true} {
		if _, err := conn.Exec(ctx, `UPDATE q SET status = 'pending'`); err != nil {
			t.Fatal(err)
		}
		args := []string{"run", pb, "--credential", "pg=" + dsn, "--eventlog", "sqlite:" + filepath.Join(dir, "events.db"), "--progress", "never"}
		if asJSON {
			args = append(args, "--json")
		}
		var out, errOut bytes.Buffer
		code := dispatch(args, &out, &errOut)
		// The 7 failing rows stay claimed (no release statement): the
		// loop and the execution complete.
		if asJSON {
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			var sum struct {
				Status string                    `json:"status"`
				Loops  map[string]map[string]int `json:"cursor_loops"`
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			if l := sum.Loops["start#1"]; code != exitOK || sum.Status != "completed" || l["ok"] != 43 || l["failed"] != 7 ||
				l["unreleased"] != 7 || l["abandoned"] != 0 {
				t.Fatalf("exit %d, cursor_loops %v: want 43 ok and the failures, left claimed\n%s%s", code, sum.Loops, out.String(), errOut.String())
			}
		} else if code != exitOK || !strings.Contains(out.String(), "loop start#1: 50 row runs: 43 ok, 7 failed, 0 dead, 7 left claimed in the source (") {
			t.Fatalf("exit %d, output lacks the loop's failed rows left claimed:\n%s%s", code, out.String(), errOut.String())
		} else {
			// The event log, read back as text, says which frames had
			// failed rows and why.
			var evs bytes.Buffer
			if code := dispatch([]string{"events", executionID(t, out.String()), "--eventlog", "sqlite:" + filepath.Join(dir, "events.db")}, &evs, &errOut); code != exitOK {
				t.Fatalf("events: exit %d: %s", code, errOut.String())
			}
			if !regexp.MustCompile(`frame\.done .* rows=\d+ ok=\d+ failed=[1-9]\d* dead=0 error="row \d+: .*division by zero`).MatchString(evs.String()) ||
				!strings.Contains(evs.String(), "rows=0 ok=0 failed=0 dead=0 drained") {
				t.Fatalf("events lack the frames' counts and row errors:\n%s", evs.String())
			}
		}
		var claimed int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM q WHERE status = 'claimed' AND id % 7 = 0`).Scan(&claimed); err != nil {
			t.Fatal(err)
		}
		if claimed != 7 {
			t.Fatalf("%d of the failed rows are claimed in the table, want the 7 run said", claimed)
		}
	}
}

// TestRemoteRunSaysWhichRowsFailed: run --server says which cursor rows
// failed too, from the server's status of the execution, where it used to
// print a bare "completed" and a --json summary without cursor_loops.
func TestRemoteRunSaysWhichRowsFailed(t *testing.T) {
	ctx := context.Background()
	dsn, conn := rowQueue(t)
	cursors := cursor.NewRegistry()
	t.Cleanup(func() { _ = cursors.Close() })
	if err := cursors.Register("postgres", pgdriver.New(pgdriver.Config{})); err != nil {
		t.Fatal(err)
	}
	r := apitest.Start(t, apitest.Config{Token: remoteToken, Engine: func(c *engine.Config) {
		c.Cursors, c.Keychain = cursors, tools.StaticURLs(map[string]string{"pg": dsn})
	}})
	// The echo tool fails the rows whose id is a multiple of 7; they stay
	// claimed (no release statement) and the execution completes.
	pb := writeFile(t, "drain.yaml", drainPlaybook(` {kind: echo, msg: "{{ '`+apitest.FailMsg+`' if iter.job.id % 7 == 0 else 'ok' }}"}`))
	for _, asJSON := range []bool{false, true} {
		if _, err := conn.Exec(ctx, `UPDATE q SET status = 'pending'`); err != nil {
			t.Fatal(err)
		}
		args := []string{"run", pb, "--server", r.URL(), "--token", remoteToken, "--progress", "never"}
		if asJSON {
			args = append(args, "--json")
		}
		code, out, errOut := cli(args...)
		if asJSON {
			var sum struct {
				Status string                    `json:"status"`
				Server string                    `json:"server"`
				Loops  map[string]map[string]int `json:"cursor_loops"`
			}
			if err := json.Unmarshal([]byte(out), &sum); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if l := sum.Loops["start#1"]; code != exitOK || sum.Status != "completed" || sum.Server != r.URL() ||
				l["rows"] != 50 || l["ok"] != 43 || l["failed"] != 7 || l["dead"] != 0 || l["unreleased"] != 7 {
				t.Fatalf("exit %d, %+v: want 43 ok and 7 failed rows\n%s%s", code, sum, out, errOut)
			}
			continue
		}
		id := executionID(t, out)
		line := "loop start#1: 50 row runs: 43 ok, 7 failed, 0 dead, 7 left claimed in the source (cursorflow events " + id + " --server " + r.URL() + ")"
		if code != exitOK || !strings.Contains(out, line) {
			t.Fatalf("exit %d, output lacks %q:\n%s%s", code, line, out, errOut)
		}
	}
}
