package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestRunSaysWhichRowsFailed: a cursor loop whose body fails for some rows
// completes (the rows' failures are theirs, not the step's), and run says
// so: how many rows failed, on the terminal and in --json, rather than a
// bare "completed" that hides them.
func TestRunSaysWhichRowsFailed(t *testing.T) {
	dsn := testenv.PostgresSchema(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE q (id int PRIMARY KEY, status text NOT NULL DEFAULT 'pending');
		INSERT INTO q (id) SELECT generate_series(1, 50)`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pb := filepath.Join(dir, "drain.yaml")
	src := `apiVersion: noetl.io/v2
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
    tool:
      kind: postgres
      auth: pg
      command: "UPDATE q SET status = CASE WHEN id % 7 = 0 THEN (1/(id - id))::text ELSE 'done' END WHERE id = {{ iter.job.id }}"
`
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
			if l := sum.Loops["start#1"]; code != exitOK || sum.Status != "completed" || l["ok"] != 43 || l["failed"] != 7 {
				t.Fatalf("exit %d, cursor_loops %v: want 43 ok and the failures\n%s%s", code, sum.Loops, out.String(), errOut.String())
			}
			continue
		}
		if code != exitOK || !strings.Contains(out.String(), "loop start#1: 50 rows: 43 ok, 7 failed, 0 dead") {
			t.Fatalf("exit %d, output lacks the loop's failed rows:\n%s%s", code, out.String(), errOut.String())
		}
	}
}
