package engine_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/tools"
)

// TestCheckCredentials: every alias a playbook names as written, in the
// forms tools read it (auth, credential, NoETL's {credential: ...}) and as
// a cursor's auth, is looked up; a templated alias, one the keychain
// holds, and an auth key of a tool that does not read one are not
// reported.
func TestCheckCredentials(t *testing.T) {
	kc := tools.StaticURLs(map[string]string{"have": "postgres://x"})
	treg, _, closer := stdwire.Registries(kc, slog.New(slog.DiscardHandler), false)
	defer closer.Close()
	pb, err := dsl.Parse("creds.yaml", []byte(header+`
workload: {alias: have}
workflow:
  - step: start
    tool: {kind: postgres, auth: have, command: SELECT 1}
    next: [b]
  - step: b
    tool: {kind: postgres, auth: missing_one, command: SELECT 1}
    next: [c]
  - step: c
    tool: {kind: http, url: 'http://example.test', auth: {type: bearer, credential: missing_two}}
    next: [d]
  - step: d
    tool: {kind: postgres, auth: '{{ alias }}', command: SELECT 1}
    next: [e]
  - step: e
    tool: {kind: noop, auth: not_an_alias}
    next: [f]
  - step: f
    loop:
      cursor: {kind: postgres, auth: missing_three, claim: SELECT 1 AS id}
      iterator: r
      spec: {mode: cursor}
    tool: {kind: noop}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range engine.CheckCredentials(context.Background(), pb, treg, kc) {
		got = append(got, d.Error())
	}
	want := []string{
		`creds.yaml:11:28: step b: auth: credential alias "missing_one" is not in the keychain`,
		`creds.yaml:14:52: step c: auth: credential alias "missing_two" is not in the keychain`,
		`step f: loop.cursor.auth: credential alias "missing_three" is not in the keychain`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("problem %d: %s\nwant it to hold %s", i, got[i], want[i])
		}
	}
}
