package mysql_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/mysql"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/builtin"
)

const playbookFile = "../../examples/playbooks/mysql_drain.yaml"

// frameItems returns every row key the engine reported in frame.done
// events, with its outcome.
func frameItems(t testing.TB, evs []eventlog.Event) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, ev := range evs {
		if ev.Type != eventlog.TypeFrameDone {
			continue
		}
		var p struct {
			Items []struct {
				Key     string `json:"key"`
				Outcome string `json:"outcome"`
			} `json:"items"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatalf("frame.done payload: %v", err)
		}
		for _, it := range p.Items {
			out[it.Key] = append(out[it.Key], it.Outcome)
		}
	}
	return out
}

// TestPlaybookDrains runs examples/playbooks/mysql_drain.yaml through
// the engine against a 10,000-row table with 4 frame slots and checks
// that every row was processed exactly once.
func TestPlaybookDrains(t *testing.T) {
	const n = 10000
	src, err := os.ReadFile(playbookFile)
	if err != nil {
		t.Fatal(err)
	}
	db, base := admin(t)
	table := "e2e_jobs_" + randSuffix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, `CREATE TABLE `+table+` (
		id bigint PRIMARY KEY, payload bigint NOT NULL,
		status varchar(16) NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0,
		claimed_at datetime(6) NULL, result bigint NULL, done_count int NOT NULL DEFAULT 0,
		KEY status_id (status, id))`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })
	for start := 1; start <= n; start += 1000 {
		vals := make([]string, 0, 1000)
		for id := start; id < start+1000 && id <= n; id++ {
			vals = append(vals, fmt.Sprintf("(%d, %d)", id, id+7))
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO `+table+` (id, payload) VALUES `+strings.Join(vals, ",")); err != nil {
			t.Fatal(err)
		}
	}

	kc := tools.StaticURLs(map[string]string{"mysql_queue": base.FormatDSN()})
	treg, tclose := builtin.NewRegistry(builtin.Options{Keychain: kc})
	t.Cleanup(func() { _ = tclose.Close() })
	creg := cursor.NewRegistry()
	if err := creg.Register("mysql", mysql.New(mysql.Config{})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = creg.Close() })
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })

	began := time.Now()
	id, err := e.Start(ctx, src, engine.StartOptions{File: playbookFile, Workload: map[string]any{"table": table}})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(began)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("execution %s: %s %s %s", sum.Status, sum.Step, sum.Field, sum.Error)
	}
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}

	// The source: every row done, acked once, with the body's result.
	var done, once, maxDone int
	err = db.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(status = 'done' AND result = payload * 2), 0),
		COALESCE(SUM(done_count = 1), 0), COALESCE(MAX(done_count), 0) FROM `+table).Scan(&done, &once, &maxDone)
	if err != nil {
		t.Fatal(err)
	}
	if done != n || once != n || maxDone != 1 {
		t.Fatalf("rows done %d, acked once %d, max acks %d; want %d, %d, 1", done, once, maxDone, n, n)
	}
	// The engine: every key ran through the body once, successfully.
	items := frameItems(t, evs)
	if len(items) != n {
		t.Fatalf("the engine reported %d distinct keys, want %d", len(items), n)
	}
	for i := 1; i <= n; i++ {
		if got := items[strconv.Itoa(i)]; len(got) != 1 || got[0] != engine.OutcomeOK {
			t.Fatalf("key %d: outcomes %v, want [ok]", i, got)
		}
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	ls := st.Loops["start#1"]
	if ls.OK != n || !ls.Finished {
		t.Fatalf("loop status %+v, want %d rows ok and finished", ls, n)
	}
	t.Logf("drained %d rows in %v (%.0f rows/s), %d frames, %d events (%.4f per row)",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), ls.Frames, len(evs), float64(len(evs))/n)
}
