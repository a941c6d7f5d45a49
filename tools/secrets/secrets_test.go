package secrets_test

import (
	"context"
	"errors"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/http"
	"github.com/cursorflow/cursorflow/tools/secrets"
)

const token = "s3cr3t-t0ken-value"

func TestToolReturnsAReference(t *testing.T) {
	t.Parallel()
	kc := tools.StaticKeychain{"api_token": {URL: token, Fields: map[string]string{"user": "bob"}}}
	tool := secrets.New(nil)
	ctx := context.Background()
	out, err := tool.Execute(ctx, &tools.Call{Config: map[string]any{"secret_name": "api_token"}, Keychain: kc})
	if err != nil {
		t.Fatal(err)
	}
	data := out.Data.(map[string]any)
	if data["secret_value"] != "${secret:api_token}" || data["provider"] != "keychain" || data["version"] != "latest" {
		t.Fatalf("data = %#v", data)
	}
	out, err = tool.Execute(ctx, &tools.Call{Config: map[string]any{"secret_name": "api_token", "field": "user"}, Keychain: kc})
	if err != nil || out.Data.(map[string]any)["secret_value"] != "${secret:api_token#user}" {
		t.Fatalf("field: %v %#v", err, out.Data)
	}
	for name, cfg := range map[string]map[string]any{
		"unknown alias": {"secret_name": "nope"},
		"unknown field": {"secret_name": "api_token", "field": "nope"},
	} {
		if _, err := tool.Execute(ctx, &tools.Call{Config: cfg, Keychain: kc}); err == nil || strings.Contains(err.Error(), token) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := tool.Execute(ctx, &tools.Call{Config: map[string]any{"secret_name": "api_token", "provider": "aws"}, Keychain: kc}); !errors.Is(err, secrets.ErrBadConfig) {
		t.Errorf("cloud provider: %v, want ErrBadConfig", err)
	}
}

func TestRevealAndConceal(t *testing.T) {
	t.Parallel()
	kc := tools.StaticKeychain{"a": {URL: "AAA"}, "b": {Fields: map[string]string{"pw": "BBB"}}}
	in := map[string]any{"h": "Bearer ${secret:a}", "l": []any{"x ${secret:b#pw} y", int64(3)}}
	out, revealed, err := tools.RevealSecrets(context.Background(), kc, in)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(map[string]any)
	if m["h"] != "Bearer AAA" || m["l"].([]any)[0] != "x BBB y" || in["h"] != "Bearer ${secret:a}" {
		t.Fatalf("revealed %#v (input %#v)", out, in)
	}
	back := tools.ConcealSecrets(map[string]any{"echo": "got AAA and BBB"}, revealed)
	if back.(map[string]any)["echo"] != "got ${secret:a} and ${secret:b#pw}" {
		t.Fatalf("concealed %#v", back)
	}
}

// TestSecretNeverReachesTheLog runs a playbook that reads a secret and
// sends it in an http header to a server that echoes it: the server gets
// the secret, the event log and the step results hold only the reference.
func TestSecretNeverReachesTheLog(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var gotAuth string
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		mu.Lock()
		gotAuth = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"echo": "`+r.Header.Get("Authorization")+`"}`)
	}))
	defer srv.Close()

	// The entry lists where its secret may go (the http tool sends it
	// nowhere else).
	kc := tools.StaticKeychain{"api_token": {URL: token, Hosts: []string{"127.0.0.1"}}}
	reg := tools.NewRegistry()
	reg.MustRegister("secrets", secrets.New(nil))
	reg.MustRegister("http", http.New(http.Config{}))
	log := eventlog.NewMemory()
	eng, err := engine.New(engine.Config{Log: log, Tools: reg, Keychain: kc, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: secret_header}
workload:
  api: ` + srv.URL + `
workflow:
  - step: start
    tool: {kind: secrets, secret_name: api_token}
    next: [call]
  - step: call
    tool:
      kind: http
      url: '{{ api }}/me'
      headers: {Authorization: 'Bearer {{ start.secret_value }}'}
`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := eng.Start(ctx, []byte(src), engine.StartOptions{File: "secret.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := eng.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("status %v %v: %s", sum, err, sum.Error)
	}
	mu.Lock()
	if gotAuth != "Bearer "+token {
		t.Errorf("server got Authorization %q, want the secret", gotAuth)
	}
	mu.Unlock()
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if strings.Contains(string(ev.Payload), token) {
			t.Fatalf("event %d (%s) holds the secret: %s", ev.Seq, ev.Type, ev.Payload)
		}
	}
	body := sum.Results["call"].(map[string]any)["data"].(map[string]any)["data"].(map[string]any)
	if body["echo"] != "Bearer ${secret:api_token}" {
		t.Errorf("echoed body = %#v, want the reference", body)
	}
}
