package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestResumeWithTheWrongEventLog: a resume pointed at the wrong log says
// so and where it looked, without the log's password, and a mistyped
// SQLite path leaves no new, empty log behind.
func TestResumeWithTheWrongEventLog(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "typo.db")
	code, _, errOut := cli("resume", "01a21c00-0000-7000-8000-000000000000", "--eventlog", "sqlite:"+missing)
	if code != exitInvalid || !strings.Contains(errOut, "no event log at "+missing) || !strings.Contains(errOut, "check --eventlog") {
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
	if code != exitInvalid || !strings.Contains(errOut, "check --eventlog") || strings.Contains(errOut, "hunter2-secret") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
