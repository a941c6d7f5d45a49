package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog/eventlogurl"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestResumeWithTheWrongEventLog: a resume pointed at the wrong log says
// so and where it looked, without the log's password, and a mistyped
// SQLite path leaves no new, empty log behind.
func TestResumeWithTheWrongEventLog(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "typo.db")
	code, _, errOut := cli("resume", "01a21c00-0000-7000-8000-000000000000", "--eventlog", "sqlite:"+missing)
	if code != exitInvalid || !strings.Contains(errOut, "no event log at sqlite:"+missing) || !strings.Contains(errOut, "check --eventlog") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("the resume created %s: %v", missing, err)
	}

	// The server trusts the test's connections: the password is only
	// there to be kept out of the message.
	u, err := url.Parse(pgLockLog(t, testenv.Postgres(t)))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "hunter2-secret")
	code, _, errOut = cli("resume", "01a21c00-0000-7000-8000-000000000000", "--eventlog", u.String())
	if code != exitInvalid || !strings.Contains(errOut, "no event log at") || strings.Contains(errOut, "hunter2-secret") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// ... and creates no log schema in that database.
	schema := u.Query().Get(eventlogurl.SchemaParam)
	var n int
	testenv.QueryRow(t, testenv.Postgres(t), "SELECT count(*) FROM information_schema.schemata WHERE schema_name = '"+schema+"'", &n)
	if n != 0 {
		t.Fatalf("the resume created schema %s", schema)
	}
	for _, cmd := range []string{"status", "events"} {
		if code, _, errOut := cli(cmd, "01a21c00-0000-7000-8000-000000000000", "--eventlog", u.String()); code != exitInvalid || !strings.Contains(errOut, "no event log at") {
			t.Fatalf("%s: exit %d: %s", cmd, code, errOut)
		}
	}

	// A log that is there, without the execution: said, with where.
	log, err := eventlogurl.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	_ = log.Close()
	code, _, errOut = cli("resume", "01a21c00-0000-7000-8000-000000000000", "--eventlog", u.String())
	if code != exitInvalid || !strings.Contains(errOut, "has no events, in the event log") || strings.Contains(errOut, "hunter2-secret") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
