package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// TestReportsSanitized: a tool that resolves a credential and then leaks
// its secret — in its result, a partial result, an error — leaves no
// trace of it in the log; an error message over MaxErrorBytes is cut and
// says how long it was.
func TestReportsSanitized(t *testing.T) {
	t.Parallel()
	const secret = "pw-4e1f9c2a-very-secret"
	reg := tools.NewRegistry()
	reg.MustRegister("leaky", fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		cred, err := call.Keychain.Resolve(ctx, "api")
		if err != nil {
			return nil, err
		}
		token := cred.Fields["token"]
		call.EmitPartial(map[string]any{"line": "using " + token})
		if call.Config["fail"] == true {
			return nil, errors.New("upstream said: " + token + " " + strings.Repeat("e", 20000))
		}
		return map[string]any{"echo": "Bearer " + token, token: "as a key"}, nil
	}))
	log := eventlog.NewMemory()
	eng, err := engine.New(engine.Config{Log: log, Tools: reg, Tick: 5 * time.Millisecond,
		Keychain: tools.StaticKeychain{"api": {Alias: "api", Fields: map[string]string{"token": secret}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	sum, evs := (&bundle{log: log, eng: eng}).run(t, header+`
workflow:
  - step: start
    tool: {kind: leaky}
    next: [bad]
  - step: bad
    tool: {kind: leaky, fail: true}
`, nil)
	if sum.Status != engine.StatusFailed || sum.Step != "bad" {
		t.Fatalf("summary %+v", sum)
	}
	redacted := 0
	for _, ev := range evs {
		if strings.Contains(string(ev.Payload), secret) {
			t.Fatalf("%s holds the secret: %.300s", ev.Type, ev.Payload)
		}
		if strings.Contains(string(ev.Payload), tools.Redacted) {
			redacted++
		}
	}
	if redacted < 3 || logtest.CountType(evs, eventlog.TypeCallPartial) != 2 {
		t.Fatalf("%d events redacted, %d partials", redacted, logtest.CountType(evs, eventlog.TypeCallPartial))
	}
	if len(sum.Error) > engine.MaxErrorBytes+100 || !strings.Contains(sum.Error, "truncated: ") {
		t.Fatalf("the error is %d bytes: %.200s", len(sum.Error), sum.Error)
	}
}
