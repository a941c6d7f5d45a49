package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

var screenshots = flag.String("screenshots", "", "directory TestDashboardInABrowser writes its screenshots to (the README's are in docs/)")

// gatedDrain drains {{ table }} like drainPlaybook, one set-based UPDATE
// per frame, except that a frame holding a row id above {{ gate_after }}
// first waits for the advisory lock {{ lock }}, which the test holds:
// the loop makes visible progress, then waits until the test lets it
// finish. A cancel interrupts a frame blocked at the gate one lease
// (lease_seconds) after it reached the worker. Its apiVersion, on line 5,
// is not NoETL's: a warning (that does not stop it running) the dashboard
// marks at its line.
const gatedDrain = `kind: Playbook
metadata: {name: gated-drain}
workload: {table: items, lock: 0, gate_after: 0}
executor: {profile: distributed}
apiVersion: example.org/v1
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          WITH c AS (
            SELECT id FROM {{ table }} WHERE status = 'pending'
             ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
          UPDATE {{ table }} q SET status = 'claimed' FROM c WHERE q.id = c.id RETURNING q.id
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 2
        frame: {max_rows: 5, process: frame, lease_seconds: 3}
    tool:
      kind: postgres
      auth: pg
      command: >-
        SELECT pg_advisory_lock_shared({{ lock }}), pg_advisory_unlock_shared({{ lock }})
          FROM (SELECT max(r.id) AS top FROM jsonb_to_recordset({{ iter.job | tojson | sql_literal }}::jsonb) AS r(id bigint)) m
         WHERE m.top > {{ gate_after }};
        UPDATE {{ table }} q SET status = 'done', done_count = q.done_count + 1
          FROM jsonb_to_recordset({{ iter.job | tojson | sql_literal }}::jsonb) AS r(id bigint)
         WHERE q.id = r.id AND q.status = 'claimed'
    next:
      - step: report
        when: '{{ event.name == "loop.done" }}'
  - step: report
    tool:
      kind: postgres
      auth: pg
      query: SELECT count(*) AS done FROM {{ table }} WHERE status = 'done'
`

// gate is an advisory lock the test holds on its own connection.
type gate struct {
	conn *pgxpool.Conn
	key  int64
}

func holdGate(t *testing.T, pool *pgxpool.Pool) *gate {
	t.Helper()
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{conn: conn, key: rand.Int64N(1 << 40)}
	if _, err := conn.Exec(context.Background(), "SELECT pg_advisory_lock($1)", g.key); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.open)
	return g
}

// open releases the lock (idempotent) and the connection.
func (g *gate) open() {
	if g.conn == nil {
		return
	}
	_, _ = g.conn.Exec(context.Background(), "SELECT pg_advisory_unlock_all()")
	g.conn.Release()
	g.conn = nil
}

// TestDashboardInABrowser drives the dashboard in a real browser
// (Debian's Chromium, headless) against a server with a worker: it logs
// in with the token, finds a running execution in the list, watches its
// cursor loop make progress and then complete on its page, and cancels
// another execution with the page's Cancel button.
func TestDashboardInABrowser(t *testing.T) {
	chromium := testenv.Chromium(t)
	e := newEnv(t, 40)
	if _, err := e.pool.Exec(context.Background(), fmt.Sprintf(`CREATE TABLE %[1]s_b (LIKE %[1]s INCLUDING ALL);
		INSERT INTO %[1]s_b (id) SELECT g FROM generate_series(1, 10) g;
		CREATE TABLE %[1]s_c (LIKE %[1]s_b INCLUDING ALL); INSERT INTO %[1]s_c SELECT * FROM %[1]s_b`, e.table)); err != nil {
		t.Fatal(err)
	}
	serverBin, workerBin := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := e.server(t, serverBin, "server")
	srv.waitHealthy(ctx, t)
	leaderOf(ctx, t, []*replica{srv})
	worker := e.worker(t, workerBin, "worker", 4)

	gateA, gateB := holdGate(t, e.pool), holdGate(t, e.pool)
	var a, b api.Started
	if _, err := srv.do(ctx, http.MethodPost, "/v1/executions", api.StartRequest{Source: gatedDrain, File: "gated-drain.yaml",
		Workload: map[string]any{"table": e.table, "lock": gateA.key, "gate_after": 20}}, &a); err != nil {
		t.Fatal(err)
	}

	outDir := *screenshots
	if outDir == "" {
		outDir = t.TempDir()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.WindowSize(1280, 860))
	actx, stopAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer stopAlloc()
	bctx, stopBrowser := chromedp.NewContext(actx)
	defer stopBrowser()
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// until waits for a JavaScript condition on the page to hold. A poll
	// does not survive a navigation (a form submitted, a link followed):
	// it is started again on the new page.
	until := func(what, expr string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			_, err := chromedp.Run(bctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond),
				chromedp.WithPollingTimeout(time.Until(deadline))))
			if err == nil {
				return
			}
			msg := err.Error()
			navigated := strings.Contains(msg, "Cannot find context") || strings.Contains(msg, "context was destroyed") ||
				strings.Contains(msg, "target navigated")
			if !navigated || time.Now().After(deadline) {
				html, _ := chromedp.Run(bctx, chromedp.Evaluate[string]("document.body.innerText"))
				t.Fatalf("%s: %v\npage text:\n%s", what, err, html)
			}
		}
	}
	number := func(expr string) float64 {
		t.Helper()
		n, err := chromedp.Run(bctx, chromedp.Evaluate[float64](expr))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outDir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := "http://" + srv.addr

	// The dashboard asks for the token once.
	do("open the dashboard", chromedp.Navigate(base+"/ui/"))
	until("the login form", `!!document.querySelector("form#login") && location.pathname === "/ui/login"`)
	do("log in", chromedp.SendKeys(chromedp.ID("token"), e.token), chromedp.Submit(chromedp.ID("login")))
	until("the running execution in the list",
		fmt.Sprintf(`document.querySelector('tr[data-execution=%q]')?.dataset.status === "running"`, a.ExecutionID))
	if cookies, err := chromedp.Run(bctx, chromedp.Evaluate[string]("document.cookie")); err != nil || cookies != "" {
		t.Fatalf("the session cookie is readable by scripts: %q %v", cookies, err)
	}

	// Its page shows the cursor loop progressing while the gate holds the
	// frames past row 20.
	do("open the execution", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-execution=%q] a`, a.ExecutionID))))
	loop := `document.querySelector('.loop[data-loop="start#1"]')`
	until("rows done while the execution runs",
		loop+`?.dataset.done >= 20 && document.querySelector("#status").dataset.status === "running"`)
	midway := number("Number(" + loop + ".dataset.done)")
	if midway >= 40 {
		t.Fatalf("the loop shows %v rows done before the gate opened", midway)
	}
	until("the live tail", `document.querySelectorAll("#tail tr[data-type='frame.done']").length >= 4`)
	until("the playbook source with its warning marked at its line",
		`document.querySelectorAll("#source li").length > 20 && document.querySelector('#source li[data-line="5"]').classList.contains("warning")`)
	shot("dashboard-execution.png")

	gateA.open()
	until("the loop done and the execution completed",
		loop+`?.dataset.done == 40 && `+loop+`.dataset.finished === "true" && document.querySelector("#status").dataset.status === "completed"`)
	until("the report step completed", `document.querySelector('tr[data-step="report"] .badge')?.textContent === "completed"`)
	until("the tail ends with the terminal event", `!!document.querySelector("#tail tr[data-type='execution.completed']")`)
	if n, err := e.done(ctx); err != nil || n != 40 {
		t.Fatalf("%d rows done in the table (%v), want 40", n, err)
	}

	// Cancel ends another execution, blocked from its first frame.
	if _, err := srv.do(ctx, http.MethodPost, "/v1/executions", api.StartRequest{Source: gatedDrain, File: "gated-drain.yaml",
		Workload: map[string]any{"table": e.table + "_b", "lock": gateB.key, "gate_after": 0}}, &b); err != nil {
		t.Fatal(err)
	}
	do("open the other execution", chromedp.Navigate(base+"/ui/executions/"+b.ExecutionID))
	until("the cancel button enabled", `document.querySelector("#status").dataset.status === "running" && !document.querySelector("#cancel").disabled`)
	do("cancel", chromedp.Click(chromedp.ID("cancel")))
	until("the execution cancelled", `document.querySelector("#status").dataset.status === "cancelled" && document.querySelector("#cancel").disabled`)
	until("its loop's badge says cancelled", loop+`?.querySelector(".badge")?.textContent === "cancelled"`)
	// The rows the cancel interrupted are counted apart (not failed), and
	// shown.
	until("its loop shows the rows the cancel stopped", loop+`?.dataset.cancelled > 0 && `+
		loop+`.querySelector(".stat.cancelled b")?.textContent === `+loop+`.dataset.cancelled && `+loop+`.dataset.failed === "0"`)
	term, err := e.terminal(ctx, b.ExecutionID)
	if err != nil || term != "execution.cancelled" {
		t.Fatalf("the log ends the cancelled execution with %q (%v)", term, err)
	}
	gateB.open()

	// The list shows them all, a third one running, and filters by status.
	gateC := holdGate(t, e.pool)
	var c api.Started
	if _, err := srv.do(ctx, http.MethodPost, "/v1/executions", api.StartRequest{Source: gatedDrain, File: "gated-drain.yaml",
		Workload: map[string]any{"table": e.table + "_c", "lock": gateC.key, "gate_after": 0}}, &c); err != nil {
		t.Fatal(err)
	}
	do("back to the list", chromedp.Navigate(base+"/ui/"))
	until("the three executions listed", fmt.Sprintf(`document.querySelector('tr[data-execution=%q]')?.dataset.status === "completed" && `+
		`document.querySelector('tr[data-execution=%q]')?.dataset.status === "cancelled" && `+
		`document.querySelector('tr[data-execution=%q]')?.dataset.status === "running"`, a.ExecutionID, b.ExecutionID, c.ExecutionID))
	shot("dashboard-list.png")
	do("filter cancelled", chromedp.SetValue(chromedp.ID("filter"), "cancelled"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#filter").dispatchEvent(new Event("change"))`))
	until("only the cancelled one", fmt.Sprintf(`document.querySelectorAll("#executions tbody tr").length === 1 && `+
		`!!document.querySelector('tr[data-execution=%q]') && location.search === "?status=cancelled"`, b.ExecutionID))

	// A worker killed while it runs the third execution's frames: once
	// the engine has re-issued them, the loop is held (what they may
	// have claimed unrecorded is the source's to take back, a frame
	// lease later), and its card says until when.
	do("open the third execution", chromedp.Navigate(base+"/ui/executions/"+c.ExecutionID))
	until("its frames in flight", loop+`?.dataset.finished === "false" && document.querySelector("#in-flight").textContent !== "0"`)
	worker.kill()
	until("the loop held after the lost attempts", loop+`?.querySelector(".hold")?.textContent.startsWith("Held until ") && !!`+loop+`.dataset.holdUntil`)
	if !strings.HasSuffix(outDir, "docs") {
		t.Logf("screenshots in %s", outDir)
	}
}
