package main

import (
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestCredentialNeverEchoed: a --credential value without an alias, or
// with a URL whose query holds '=' and no alias before it, is refused
// (exit 2) with the form wanted, and the value, password included, never
// reaches stderr. The worker used to print the whole value, and took
// "postgres://u:p@h/db?sslmode" as the alias of the second.
func TestCredentialNeverEchoed(t *testing.T) {
	for _, value := range []string{"postgres://app:pw@db/app", "postgres://u:pw@h/db?sslmode=disable"} {
		var stderr testenv.SyncBuffer
		// The flags are checked before the worker connects to NATS; a
		// value wrongly accepted has the worker wait for the unreachable
		// NATS instead of exiting.
		exit := make(chan int, 1)
		go func() { exit <- run([]string{"--nats", "nats://127.0.0.1:1", "--credential", value}, &stderr) }()
		var code int
		select {
		case code = <-exit:
		case <-time.After(30 * time.Second):
			t.Fatalf("--credential %q: the worker went on to connect to NATS; stderr %q", value, stderr.String())
		}
		msg := stderr.String()
		if code != 2 || !strings.Contains(msg, "want alias=URL") || strings.Contains(msg, "pw") || strings.Contains(msg, "postgres") {
			t.Errorf("--credential %q: exit %d, stderr %q", value, code, msg)
		}
	}
}
