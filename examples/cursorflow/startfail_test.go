package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/eventlog/eventlogurl"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestRunWhoseStartAppendFails: the PostgreSQL event log fails a run's
// first append, execution.started, in the two ways a connection does.
// Lost reply: the log stores the start and the connection is cut before
// its answer comes back (a server crash or a network cut just after the
// commit), so the run cannot tell whether its start is on record. Cut:
// the connection goes before the append reaches the server, which then
// refuses connections for a moment (a restart). The run used to exit 1
// with the append's error ("report not recorded now, send it again"),
// naming no execution and no resume command; after a lost reply the log
// held the execution, running, that nothing drove. Now it asks again until
// the log answers, finds its start on record or records it, and carries
// the execution to its end, each step run once.
func TestRunWhoseStartAppendFails(t *testing.T) {
	dsn := testenv.Postgres(t)
	for _, tc := range []struct {
		name  string
		fault func(p *testenv.Proxy, marker []byte) <-chan struct{}
	}{
		{"lost reply", func(p *testenv.Proxy, marker []byte) <-chan struct{} { return p.LoseReplyTo(marker) }},
		{"cut, then refused", func(p *testenv.Proxy, marker []byte) <-chan struct{} { return p.CutAt(marker, 5) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			startAppendFails(t, dsn, tc.fault)
		})
	}
}

// startAppendFails runs a two-step playbook through the CLI with its
// event log behind a proxy that fault arms on the start's append, and
// checks that the execution completed, each step once, in one execution.
func startAppendFails(t *testing.T, dsn string, fault func(p *testenv.Proxy, marker []byte) <-chan struct{}) {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := "cli_startfail_" + testenv.RandomSuffix(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = conn.Close(ctx)
		}
	})
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set(eventlogurl.SchemaParam, schema)
	u.RawQuery = q.Encode()

	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	pb := filepath.Join(dir, "flow.yaml")
	// The playbook's name is in execution.started only (its source is
	// recorded there): the proxy loses the reply to that append.
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: lost-start-reply}
workflow:
  - step: start
    tool: {kind: shell, command: "echo start >> ` + out + `"}
    next: [{step: second}]
  - step: second
    tool: {kind: shell, command: "echo second >> ` + out + `"}
`
	if err := os.WriteFile(pb, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	lost := fault(proxy, []byte("lost-start-reply"))
	code, stdout, stderr := cli("run", pb, "--eventlog", u.String(), "--progress", "never")
	select {
	case <-lost:
	default:
		t.Fatalf("the proxy never saw the start's append (exit %d): %s%s", code, stdout, stderr)
	}
	if code != exitOK || !strings.Contains(stdout, "completed") {
		t.Fatalf("exit %d, want the execution carried to its end:\n%s%s", code, stdout, stderr)
	}
	ran, err := os.ReadFile(out)
	if err != nil || string(ran) != "start\nsecond\n" {
		t.Fatalf("the steps ran %q (%v), want each once", ran, err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var starts, ends int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE type = 'execution.started'), count(*) FILTER (WHERE type = 'execution.completed') FROM `+schema+`.events`).Scan(&starts, &ends); err != nil {
		t.Fatal(err)
	}
	if starts != 1 || ends != 1 {
		t.Fatalf("the log holds %d starts and %d ends, want one execution, completed", starts, ends)
	}
}
