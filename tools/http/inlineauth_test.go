package http_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	cfhttp "github.com/cursorflow/cursorflow/tools/http"
)

// TestInlineAuth: NoETL's auth blocks that carry their credential send
// it, with the playbook's header name, and redact it from the response;
// a block that neither names nor carries a credential is refused instead
// of sending the request without one.
func TestInlineAuth(t *testing.T) {
	t.Parallel()
	srv := echo(t)
	kc := tools.StaticKeychain{"keyed": {URL: srv.URL, Fields: map[string]string{"api_key": "key-0123456789", "header_name": "X-Api-Key"}}}
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	call := func(auth any, headers map[string]any) (tools.Output, error) {
		cfg := map[string]any{"url": srv.URL, "auth": auth}
		if headers != nil {
			cfg["headers"] = headers
		}
		return tool.Execute(context.Background(), &tools.Call{Keychain: kc, Config: cfg})
	}
	for name, tc := range map[string]struct {
		auth  any
		authz string
	}{
		"bearer":       {map[string]any{"type": "bearer", "token": "tok-inline-0001"}, "Bearer [REDACTED]"},
		"named bearer": {map[string]any{"myapi": map[string]any{"type": "bearer", "token": "tok-inline-0002"}}, "Bearer [REDACTED]"},
		"basic":        {map[string]any{"type": "basic", "username": "u", "password": "pw-inline-0003"}, "Basic [REDACTED]"},
	} {
		out, err := call(tc.auth, nil)
		if err != nil || out.Status != tools.StatusSuccess {
			t.Fatalf("%s: %v %+v", name, err, out)
		}
		body := out.Data.(map[string]any)["data"].(map[string]any)
		if got := body["authz"]; !strings.HasPrefix(got.(string), strings.Fields(tc.authz)[0]+" ") || strings.Contains(got.(string), "inline") {
			t.Errorf("%s: the server saw Authorization %q (as echoed back, redacted), want %q", name, got, tc.authz)
		}
	}
	// The block's header name wins over the keychain credential's, and
	// an inline api key goes in the header it names.
	for _, auth := range []map[string]any{
		{"type": "api_key", "credential": "keyed", "header_name": "X-Custom"},
		{"type": "api_key", "value": "key-inline-0004", "header_name": "X-Custom"},
	} {
		out, err := call(auth, nil)
		if err != nil || out.Status != tools.StatusSuccess {
			t.Fatalf("%v: %v %+v", auth, err, out)
		}
		if got := out.Data.(map[string]any)["data"].(map[string]any)["custom"]; got != "[REDACTED]" {
			t.Errorf("%v: X-Custom echoed as %q, want the key (redacted)", auth, got)
		}
	}
	if _, err := call(map[string]any{"type": "bearer"}, nil); !errors.Is(err, cfhttp.ErrBadConfig) {
		t.Errorf("a bearer block without a token: %v, want ErrBadConfig", err)
	}
	if _, err := call(map[string]any{"myapi": map[string]any{"type": "bearer", "tokn": "x"}}, nil); !errors.Is(err, cfhttp.ErrBadConfig) {
		t.Errorf("a misspelt block: %v, want ErrBadConfig", err)
	}
}
