package main

import (
	"slices"
	"strings"
	"testing"
)

// TestValidateWarnsUnreadKeys: as a user runs it, validate warns at each
// tool key nothing reads — bogus keys, a timeout postgres does not have,
// the typo parms for params, which would otherwise fail at run with
// "there is no parameter $1" — still says ok (exit 0: warnings only),
// and says nothing about correct postgres, http and shell tasks.
func TestValidateWarnsUnreadKeys(t *testing.T) {
	t.Parallel()
	bogus := writeFile(t, "bogus.yaml", `workflow:
  - step: start
    tool: {kind: postgres, auth: pg, command: SELECT pg_sleep(3), timeout_seconds: 1, retries: 5, totally_bogus_key: 1}
    next: [typo]
  - step: typo
    tool:
      kind: postgres
      auth: pg
      command: SELECT $1::int
      parms: ['41']
`)
	code, out, errOut := runValidate(bogus)
	want := []string{
		bogus + `:3:67: warning: step start: tool kind postgres has no configuration key "timeout_seconds" (ignored)`,
		bogus + `:3:87: warning: step start: tool kind postgres has no configuration key "retries" (ignored)`,
		bogus + `:3:99: warning: step start: tool kind postgres has no configuration key "totally_bogus_key" (ignored)`,
		bogus + `:10:7: warning: step typo: tool kind postgres has no configuration key "parms" (ignored)`,
		"ok " + bogus,
	}
	if code != exitOK || !slices.Equal(lines(out), want) {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s\nstderr %s", code, out, strings.Join(want, "\n"), errOut)
	}

	good := writeFile(t, "good.yaml", `workflow:
  - step: start
    tool:
      kind: postgres
      auth: pg
      command: SELECT $1::int
      params: ['41']
    next: [get]
  - step: get
    tool: {kind: http, method: GET, url: 'http://example.com/{{ start.rows }}', params: {q: 1}, headers: {a: b}, timeout: 5}
    next: [sh]
  - step: sh
    tool: {kind: shell, command: 'echo hi', env: {A: b}, dir: /tmp, timeout_seconds: 2}
`)
	code, out, errOut = runValidate(good)
	if want := []string{"ok " + good}; code != exitOK || !slices.Equal(lines(out), want) {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s\nstderr %s", code, out, strings.Join(want, "\n"), errOut)
	}
}
