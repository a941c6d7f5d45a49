package apitest_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/internal/apitest"
)

const playbook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: apitest}
workflow:
  - step: start
    tool: {kind: gate}
    next:
      - step: hello
  - step: hello
    tool: {kind: echo, msg: '{{ workload.msg }}'}
`

// TestServer runs executions on the engine behind the API and checks the
// tools, the token and Configure.
func TestServer(t *testing.T) {
	configured := false
	s := apitest.Start(t, apitest.Config{Token: "tok", Configure: func(c *api.Config) {
		configured = c.Engine != nil && c.Token == "tok" && c.KeepAlive == apitest.KeepAlive
	}})
	if !configured {
		t.Fatal("Configure was not called with the server's api.Config")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The API checks the token.
	res, err := http.Post(s.URL()+"/v1/executions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST without token: status %d, want 401", res.StatusCode)
	}

	// The gate holds the execution until it is closed; echo records and
	// fails on FailMsg.
	ok, err := s.Engine.Start(ctx, []byte(playbook), engine.StartOptions{Workload: map[string]any{"msg": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := s.Engine.Start(ctx, []byte(playbook), engine.StartOptions{Workload: map[string]any{"msg": apitest.FailMsg}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Seen(); len(got) != 0 {
		t.Fatalf("echo ran before the gate opened: %v", got)
	}
	close(s.Gate)
	for id, want := range map[string]string{ok: engine.StatusCompleted, bad: engine.StatusFailed} {
		sum, err := s.Engine.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Status != want {
			t.Fatalf("execution %s: status %s, want %s", id, sum.Status, want)
		}
	}
	got := s.Seen()
	slices.Sort(got)
	if !slices.Equal(got, []string{apitest.FailMsg, "hi"}) {
		t.Fatalf("Seen() = %v, want [fail hi]", got)
	}
	if evs, err := s.Log.Read(ctx, ok, 0, 0); err != nil || len(evs) == 0 {
		t.Fatalf("Log holds %d events of %s (%v)", len(evs), ok, err)
	}
}
