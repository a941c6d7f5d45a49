package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
)

func TestKeychains(t *testing.T) {
	dir := t.TempDir()
	yamlPath := filepath.Join(dir, "keys.yaml")
	os.WriteFile(yamlPath, []byte("pg_main: postgres://u:p@db/app\napi:\n  url: https://api\n  token: tok\n  port: 8443\n"+
		"partner:\n  token: t\n  hosts: [a.example.com, '*.b.example.com']\n"), 0o600)
	jsonPath := filepath.Join(dir, "keys.json")
	os.WriteFile(jsonPath, []byte(`{"pg_json": {"dsn": "postgres://j@db/x", "username": "j"}}`), 0o600)
	fileKC, err := tools.NewFileKeychain(yamlPath)
	if err != nil {
		t.Fatal(err)
	}
	jsonKC, err := tools.NewFileKeychain(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CURSORFLOW_CREDENTIAL_PG_K8S_MAIN", "postgres://env@db/x")
	t.Setenv("CURSORFLOW_CREDENTIAL_HOOK", `{"url": "https://hook", "token": "t0k"}`)
	t.Setenv("CURSORFLOW_CREDENTIAL_SCOPED", `{"token": "t1k", "hosts": "a.example.com, b.example.com"}`)
	t.Setenv("CURSORFLOW_CREDENTIAL_BROKEN", `{not json secret`)
	// Numeric fields keep their digits: a float64 made 9007199254740993
	// 9007199254740992 and 123456789012345678901 123456789012345680000.
	t.Setenv("CURSORFLOW_CREDENTIAL_ACCOUNT", `{"url": "https://acct", "project": 9007199254740993, "account": 123456789012345678901, "ratio": 0.5}`)

	static := tools.StaticURLs(map[string]string{"pg_main": "postgres://static@db/x"})
	chain := tools.ChainKeychain{static, nil, tools.EnvKeychain{}, fileKC}

	tests := []struct {
		name  string
		kc    tools.Keychain
		alias string
		want  tools.Credential
		err   string
	}{
		{"static", static, "pg_main", tools.Credential{Alias: "pg_main", URL: "postgres://static@db/x"}, ""},
		{"static alias filled", tools.StaticKeychain{"x": {URL: "u"}}, "x", tools.Credential{Alias: "x", URL: "u"}, ""},
		{"env normalises alias", tools.EnvKeychain{}, "pg-k8s.main", tools.Credential{Alias: "pg-k8s.main", URL: "postgres://env@db/x"}, ""},
		{"env json", tools.EnvKeychain{}, "hook", tools.Credential{Alias: "hook", URL: "https://hook", Fields: map[string]string{"token": "t0k"}}, ""},
		{"env json numbers", tools.EnvKeychain{}, "account", tools.Credential{Alias: "account", URL: "https://acct",
			Fields: map[string]string{"project": "9007199254740993", "account": "123456789012345678901", "ratio": "0.5"}}, ""},
		{"env bad json names variable not value", tools.EnvKeychain{}, "broken", tools.Credential{}, "CURSORFLOW_CREDENTIAL_BROKEN holds invalid JSON"},
		{"file url string", fileKC, "pg_main", tools.Credential{Alias: "pg_main", URL: "postgres://u:p@db/app"}, ""},
		{"env hosts", tools.EnvKeychain{}, "scoped", tools.Credential{Alias: "scoped", Fields: map[string]string{"token": "t1k"}, Hosts: []string{"a.example.com", "b.example.com"}}, ""},
		{"file hosts", fileKC, "partner", tools.Credential{Alias: "partner", Fields: map[string]string{"token": "t"}, Hosts: []string{"a.example.com", "*.b.example.com"}}, ""},
		{"file object", fileKC, "api", tools.Credential{Alias: "api", URL: "https://api", Fields: map[string]string{"token": "tok", "port": "8443"}}, ""},
		{"file json dsn", jsonKC, "pg_json", tools.Credential{Alias: "pg_json", URL: "postgres://j@db/x", Fields: map[string]string{"username": "j"}}, ""},
		{"chain first hit wins", chain, "pg_main", tools.Credential{Alias: "pg_main", URL: "postgres://static@db/x"}, ""},
		{"chain falls through", chain, "api", tools.Credential{Alias: "api", URL: "https://api", Fields: map[string]string{"token": "tok", "port": "8443"}}, ""},
		{"chain stops on a real error", chain, "broken", tools.Credential{}, "invalid JSON"},
		{"missing", chain, "nope", tools.Credential{}, `alias "nope"`},
		{"missing static", tools.StaticKeychain{}, "nope", tools.Credential{}, `alias "nope"`},
		{"missing env", tools.EnvKeychain{}, "nope", tools.Credential{}, `alias "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.kc.Resolve(context.Background(), tt.alias)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("error leaks the value: %v", err)
				}
				if strings.Contains(tt.err, "alias") && !errors.Is(err, tools.ErrCredentialNotFound) {
					t.Errorf("err %v does not wrap ErrCredentialNotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}

	if _, err := tools.NewFileKeychain(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("- password123\n"), 0o600)
	if _, err := tools.NewFileKeychain(bad); err == nil || strings.Contains(err.Error(), "password123") {
		t.Errorf("bad file: %v", err)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	pg := tools.Credential{Alias: "pg", URL: "postgres://app:p%40ss@db:5432/app?sslmode=disable"}
	kv := tools.Credential{Alias: "kv", URL: "host=db user=app password='kvsecret' dbname=x"}
	api := tools.Credential{Alias: "api", URL: "https://api", Fields: map[string]string{"token": "tok123", "username": "bob"}}
	tests := []struct {
		name, in, want string
	}{
		{"whole url", "cannot parse postgres://app:p%40ss@db:5432/app?sslmode=disable: bad", "cannot parse credential(pg): bad"},
		{"decoded password", "auth failed for password p@ss", "auth failed for password " + tools.Redacted},
		{"encoded password", "url postgres://app:p%40ss@db/other", "url postgres://app:" + tools.Redacted + "@db/other"},
		{"key=value dsn", "failed: password=kvsecret", "failed: password=" + tools.Redacted},
		{"token field, not username", "bob sent tok123", "bob sent " + tools.Redacted},
		{"nothing to hide", "plain", "plain"},
	}
	for _, tt := range tests {
		if got := tools.Redact(tt.in, pg, kv, api); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestCredentialAllowsHost(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		c    tools.Credential
		host string
		want bool
	}{
		{tools.Credential{Hosts: []string{"api.example.com"}}, "api.example.com:443", true},
		{tools.Credential{Hosts: []string{"API.example.com"}}, "api.EXAMPLE.com", true},
		{tools.Credential{Hosts: []string{"api.example.com:8443"}}, "api.example.com", false},
		{tools.Credential{Hosts: []string{"api.example.com:8443"}}, "api.example.com:8443", true},
		{tools.Credential{Hosts: []string{"*.example.com"}}, "a.b.example.com", true},
		{tools.Credential{Hosts: []string{"*.example.com"}}, "example.com", false},
		{tools.Credential{Hosts: []string{"*.example.com"}}, "evil-example.com", false},
		{tools.Credential{Hosts: []string{"example.com"}}, "example.com.evil.net", false},
		{tools.Credential{Hosts: []string{"*"}}, "anything:1", true},
		{tools.Credential{URL: "https://api.example.com/v1"}, "api.example.com", true},
		{tools.Credential{URL: "https://api.example.com/v1"}, "other.example.com", false},
		{tools.Credential{URL: "postgres://u:p@db/x"}, "db:5432", true},
		{tools.Credential{}, "api.example.com", false},
		{tools.Credential{Hosts: []string{"::1"}}, "[::1]:8080", true},
	} {
		if got := tt.c.AllowsHost(tt.host); got != tt.want {
			t.Errorf("%+v.AllowsHost(%q) = %v, want %v", tt.c, tt.host, got, tt.want)
		}
	}
}

func TestJSONHoldsSecret(t *testing.T) {
	t.Parallel()
	creds := []tools.Credential{{Alias: "db", URL: "postgres://app:pa%3Css%3E%22w0rd@db/x"}} // password pa<ss>"w0rd
	secrets := tools.SecretsOf(creds...)
	for _, c := range []struct {
		v    any
		want bool
	}{
		{map[string]any{"a": "nothing here", "n": 1}, false},
		{map[string]any{"a": "the password is pa<ss>\"w0rd, really"}, true}, // escaped in the JSON
		{map[string]any{"pa<ss>\"w0rd": 1}, true},                           // a key
		{[]any{"postgres://app:pa%3Css%3E%22w0rd@db/x"}, true},
		{map[string]any{"a": "pa<ss>w0rd \u2028 almost"}, false},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := tools.JSONHoldsSecret(b, creds...); got != c.want {
			t.Errorf("%s: JSONHoldsSecret = %v, want %v", b, got, c.want)
		}
		// It agrees with RedactValue on the decoded text.
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if changed := !reflect.DeepEqual(tools.RedactValue(v, creds...), v); changed != c.want {
			t.Errorf("%s: RedactValue changes it: %v, JSONHoldsSecret says %v", b, changed, c.want)
		}
		// Secrets worked out once answer as the credentials do.
		if got := secrets.InJSON(b); got != c.want {
			t.Errorf("%s: Secrets.InJSON = %v, want %v", b, got, c.want)
		}
		if !reflect.DeepEqual(secrets.RedactValue(v), tools.RedactValue(v, creds...)) {
			t.Errorf("%s: Secrets.RedactValue differs from RedactValue", b)
		}
	}
	if tools.JSONHoldsSecret([]byte(`{"a":"x"}`)) {
		t.Error("no credentials, yet a secret")
	}
	var none tools.Secrets
	if !none.Empty() || none.InJSON([]byte(`{"a":"postgres://app:pa%3Css%3E%22w0rd@db/x"}`)) || none.RedactValue("x") != "x" {
		t.Error("the zero Secrets holds a secret")
	}
	if secrets.Empty() {
		t.Error("a credential with a password holds no secret")
	}
}

func TestHoldsSecretRef(t *testing.T) {
	t.Parallel()
	kc := tools.StaticURLs(map[string]string{"db": "postgres://u:p@h/d"})
	for _, c := range []struct {
		v    any
		want bool
	}{
		{nil, false},
		{"plain", false},
		{map[string]any{"a": []any{int64(1), "x", map[string]any{"b": "no"}}}, false},
		{map[string]any{"a": []any{"x", map[string]any{"b": "url ${secret:db}"}}}, true},
		{[]any{"${secret:db}"}, true},
	} {
		if got := tools.HoldsSecretRef(c.v); got != c.want {
			t.Errorf("HoldsSecretRef(%v) = %v, want %v", c.v, got, c.want)
		}
		// It agrees with RevealSecrets.
		_, revealed, err := tools.RevealSecrets(context.Background(), kc, c.v)
		if err != nil {
			t.Fatal(err)
		}
		if (len(revealed) > 0) != c.want {
			t.Errorf("%v: RevealSecrets revealed %d, HoldsSecretRef says %v", c.v, len(revealed), c.want)
		}
	}
}
