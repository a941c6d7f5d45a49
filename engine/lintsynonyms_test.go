package engine_test

import (
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/tools/builtin"
	"github.com/cursorflow/cursorflow/tools/playbook"
)

// TestLintSynonymKeys: keys that set one value of a tool (url or
// endpoint, command or query or sql, json or body or payload or form,
// timeout or timeout_seconds, dir or cwd, path or playbook, auth or
// credential) are read first present first: a task that sets two sends
// only the first, and the other, accepted and silently unused, is a
// warning at its key. One key of each group draws none.
func TestLintSynonymKeys(t *testing.T) {
	t.Parallel()
	// The code tools on, as the CLI's validate has them.
	reg, closer := builtin.NewRegistry(builtin.Options{EnablePython: true, EnableShell: true})
	t.Cleanup(func() { _ = closer.Close() })
	reg.MustRegister("playbook", playbook.New(nil))
	pb, err := dsl.Parse("p.yaml", []byte(`workflow:
  - step: start
    tool:
      kind: http
      method: POST
      url: http://127.0.0.1/a
      endpoint: http://127.0.0.1/b
      json: {a: 1}
      payload: {b: 2}
      timeout: 5
    next: [pg]
  - step: pg
    tool: {kind: postgres, auth: pg, credential: other, command: SELECT 1, sql: SELECT 2}
    next: [sh]
  - step: sh
    tool: {kind: shell, cmd: ls, command: pwd, dir: /tmp, cwd: /, timeout: 1, timeout_seconds: 2}
    next: [py]
  - step: py
    tool: {kind: python, code: 'return 1', timeout_seconds: 3}
    next: [sub]
  - step: sub
    tool: {kind: playbook, playbook: a.yaml, path: b.yaml}
    next: [null_url]
  - step: null_url
    tool: {kind: http, url: null, endpoint: http://127.0.0.1/c}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range engine.Lint(pb, reg) {
		got = append(got, d.Error())
	}
	want := []string{
		`p.yaml:7:7: step start: tool kind http reads url before endpoint: endpoint is ignored`,
		`p.yaml:9:7: step start: tool kind http reads json before payload: payload is ignored`,
		`p.yaml:13:38: step pg: tool kind postgres reads auth before credential: credential is ignored`,
		`p.yaml:13:76: step pg: tool kind postgres reads command before sql: sql is ignored`,
		`p.yaml:16:25: step sh: tool kind shell reads command before cmd: cmd is ignored`,
		`p.yaml:16:59: step sh: tool kind shell reads dir before cwd: cwd is ignored`,
		`p.yaml:16:79: step sh: tool kind shell reads timeout before timeout_seconds: timeout_seconds is ignored`,
		`p.yaml:22:28: step sub: tool kind playbook reads path before playbook: playbook is ignored`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lint:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
