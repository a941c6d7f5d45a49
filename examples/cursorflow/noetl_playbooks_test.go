package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/clirun"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// runPlaybook runs examples/playbooks/noetl/NAME through `cursorflow run`
// (in this process) with args, and returns the exit code, the JSON summary
// and the execution's events.
func runPlaybook(t *testing.T, name string, args ...string) (int, map[string]any, []eventlog.Event, string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "events.db")
	var out, errOut bytes.Buffer
	argv := append([]string{"run", filepath.Join("..", "playbooks", "noetl", name), "--eventlog", "sqlite:" + logPath, "--json"}, args...)
	code := dispatch(argv, &out, &errOut)
	var sum map[string]any
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	_ = json.Unmarshal([]byte(lines[len(lines)-1]), &sum)
	var evs []eventlog.Event
	if id, _ := sum["execution_id"].(string); id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		evs = clirun.Recorded(t, ctx, logPath, id)
	}
	return code, sum, evs, out.String() + errOut.String()
}

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not on PATH")
	}
}

func commandsOf(evs []eventlog.Event, step string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued && ev.Step == step {
			n++
		}
	}
	return n
}

// TestNoETLFormsEndToEnd runs the playbooks of examples/playbooks/noetl as
// a user would, against real servers, one per feature of issue 11.
func TestNoETLFormsEndToEnd(t *testing.T) {
	needPython(t)
	t.Run("join_fanout", func(t *testing.T) {
		t.Parallel()
		code, sum, evs, out := runPlaybook(t, "join_fanout.yaml")
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, out)
		}
		if n := commandsOf(evs, "reduce_customer"); n != 1 {
			t.Fatalf("reduce_customer ran %d times, want once", n)
		}
		if sum["steps"].(map[string]any)["audit_customer"] != nil {
			t.Errorf("audit_customer ran: %v", sum["steps"])
		}
	})
	t.Run("workbook", func(t *testing.T) {
		t.Parallel()
		code, _, evs, out := runPlaybook(t, "workbook.yaml")
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, out)
		}
		if n := commandsOf(evs, "end"); n != 1 {
			t.Fatalf("end ran %d times, want once", n)
		}
		// A cold day routes the other way, and end still runs once.
		code, sum, evs, out := runPlaybook(t, "workbook.yaml", "--set", "temperature_c=10")
		if code != exitOK || commandsOf(evs, "end") != 1 || sum["steps"].(map[string]any)["hot_task_a"] != nil {
			t.Fatalf("cold run: exit %d, steps %v\n%s", code, sum["steps"], out)
		}
		// An action whose assert.expects is not met fails the call.
		code, sum, _, out = runPlaybook(t, "workbook.yaml", "--set", "temperature_c=null")
		if code != exitInvalid || sum["failed_step"] != "eval_flag" || !strings.Contains(out, "assert.expects") {
			t.Fatalf("missing input: exit %d, summary %v\n%s", code, sum, out)
		}
	})
	t.Run("retry_forms", func(t *testing.T) {
		t.Parallel()
		api := testenv.NewPagedAPI(t, 5, 2)
		code, _, evs, out := runPlaybook(t, "retry_forms.yaml", "--set", "api_url="+api.URL)
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, out)
		}
		if got := api.Calls("/flaky?"); got != 3 || commandsOf(evs, "start") != 3 {
			t.Fatalf("/flaky called %d times in %d commands, want 3 and 3", got, commandsOf(evs, "start"))
		}
	})
	t.Run("pagination_sink", func(t *testing.T) {
		t.Parallel()
		api := testenv.NewPagedAPI(t, 35, 0)
		dsn := testenv.PostgresSchema(t)
		code, _, evs, out := runPlaybook(t, "pagination_sink.yaml", "--set", "api_url="+api.URL, "--credential", "pg="+dsn)
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, out)
		}
		// 4 pages of 10 and 3 of 15: each a recorded command.
		if n := commandsOf(evs, "fetch_all_endpoints"); n != 7 {
			t.Errorf("%d commands for 7 pages", n)
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM raw_pages").Scan(&n); err != nil || n != 70 {
			t.Fatalf("raw_pages holds %d rows (%v), want 70", n, err)
		}
	})
	t.Run("templated_scalars", func(t *testing.T) {
		t.Parallel()
		dsn := testenv.PostgresSchema(t)
		code, _, _, out := runPlaybook(t, "templated_scalars.yaml", "--credential", "pg="+dsn)
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, out)
		}
		// A bound that renders to nonsense fails naming step and field.
		code, sum, _, out := runPlaybook(t, "templated_scalars.yaml", "--credential", "pg="+dsn, "--set", "frame_lease_seconds=soon")
		if code != exitInvalid || sum["failed_step"] != "drain" || !strings.Contains(out, "loop.spec.frame.lease_seconds") {
			t.Fatalf("bad lease: exit %d, summary %v\n%s", code, sum, out)
		}
	})
	t.Run("jinja_expressions", func(t *testing.T) {
		t.Parallel()
		api := testenv.NewPagedAPI(t, 5, 0)
		if code, _, _, out := runPlaybook(t, "jinja_expressions.yaml", "--set", "api_url="+api.URL); code != exitOK {
			t.Fatalf("exit %d\n%s", code, out)
		}
		code, sum, _, out := runPlaybook(t, "division_by_zero.yaml")
		if code != exitInvalid || sum["failed_step"] != "start" || sum["failed_field"] != "average" || !strings.Contains(out, "division by zero") {
			t.Fatalf("1/0: exit %d, summary %v\n%s", code, sum, out)
		}
	})
	t.Run("tools_nats_secrets_duckdb", func(t *testing.T) {
		t.Parallel()
		natsURL := testenv.NATS(t)
		nc, err := natsgo.Connect(natsURL)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		sfx := testenv.RandomSuffix(t)
		subject, bucket := "cf.demo."+sfx, "cf_demo_"+sfx
		sub, err := nc.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		const token = "tok-" + "9f8e7d6c"
		db := filepath.Join(t.TempDir(), "demo.duckdb")
		u, err := url.Parse(natsURL)
		if err != nil {
			t.Fatal(err)
		}
		// The token's entry must allow the NATS server its header goes to.
		args := []string{"--credential", "nats_local=" + natsURL, "--set", "subject=" + subject, "--set", "bucket=" + bucket, "--set", "db=" + db}
		code, sum, refused, out := runPlaybook(t, "tools_nats_secrets_duckdb.yaml", append(args, "--credential", "api_token="+token)...)
		if code != exitInvalid || sum["failed_step"] != "announce" || !strings.Contains(out, "may not be sent to "+u.Host) {
			t.Fatalf("without hosts: exit %d, want the secret refused for %s\n%s", code, u.Host, out)
		}
		for _, ev := range refused {
			if strings.Contains(string(ev.Payload), token) {
				t.Fatalf("refused run: event %d (%s) holds the secret", ev.Seq, ev.Type)
			}
		}
		code, _, evs, out := runPlaybook(t, "tools_nats_secrets_duckdb.yaml",
			append(args, "--credential", `api_token={"url": "`+token+`", "hosts": ["`+u.Hostname()+`"]}`)...)
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, out)
		}
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil || msg.Header.Get("Authorization") != "Bearer "+token || !strings.Contains(string(msg.Data), `"user":"ada"`) {
			t.Fatalf("published %v (%v)", msg, err)
		}
		for _, ev := range evs {
			if strings.Contains(string(ev.Payload), token) {
				t.Fatalf("event %d (%s) holds the secret", ev.Seq, ev.Type)
			}
		}
		if _, err := os.Stat(db); err != nil {
			t.Errorf("duckdb file not written: %v", err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		code, sum, _, out := runPlaybook(t, "refused.yaml")
		if code != exitUsage || sum != nil {
			t.Fatalf("exit %d (summary %v), want %d and nothing run\n%s", code, sum, exitUsage, out)
		}
		for _, want := range []string{`refused.yaml:11:7: step start: tool kind "snowflake"`, "refused.yaml:19:7: step summarise: loop.aggregate"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
}
