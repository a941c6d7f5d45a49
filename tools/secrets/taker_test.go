package secrets_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/builtin"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// reverse returns s backwards, as SQL's reverse() would hand a secret back.
func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// TestSecretsGoOnlyToTakers submits, as a stranger would, playbooks that
// try to read a keychain secret back through tools that return what the
// playbook computes: a postgres SELECT of the reversed secret (named
// directly and through the secrets tool), a noop echo and a host function.
// Each fails at the field holding the reference, before the tool runs, and
// no event holds the secret or its reverse. A host function marked
// WithSecrets gets the secret, and its result holds only the reference.
func TestSecretsGoOnlyToTakers(t *testing.T) {
	t.Parallel()
	pgURL := os.Getenv("CURSORFLOW_TEST_POSTGRES")
	if pgURL == "" {
		pgURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	kc := tools.StaticKeychain{
		"api": {URL: "https://api.example.com", Fields: map[string]string{"token": token}},
		"pg":  {URL: pgURL},
	}
	reg, closer := builtin.NewRegistry(builtin.Options{Keychain: kc})
	defer closer.Close()
	var mu sync.Mutex
	var got []string
	record := func(_ context.Context, call *tools.Call) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		s, _ := call.Config["value"].(string)
		got = append(got, s)
		return map[string]any{"value": s}, nil
	}
	reg.MustRegister("plainfn", fn.New(record))
	reg.MustRegister("secretfn", fn.New(record).WithSecrets())
	log := eventlog.NewMemory()
	eng, err := engine.New(engine.Config{Log: log, Tools: reg, Keychain: kc, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	run := func(t *testing.T, steps string) *engine.Summary {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		src := "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: exfiltrate}\nworkflow:\n" + steps
		id, err := eng.Start(ctx, []byte(src), engine.StartOptions{File: "exfiltrate.yaml"})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := eng.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := log.Read(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			p := string(ev.Payload)
			if strings.Contains(p, token) || strings.Contains(p, reverse(token)) || strings.Contains(strings.ToLower(p), strings.ToLower(token)) {
				t.Fatalf("event %d (%s) holds the secret: %s", ev.Seq, ev.Type, p)
			}
		}
		return sum
	}
	refused := []struct{ name, steps, step, field string }{
		{"postgres names the secret", `  - step: start
    tool: {kind: postgres, auth: pg, command: "SELECT reverse('${secret:api#token}') AS r, upper('${secret:api#token}') AS u"}
`, "start", "command"},
		{"postgres through the secrets tool", `  - step: start
    tool: {kind: secrets, secret_name: api, field: token}
    next: [leak]
  - step: leak
    tool: {kind: postgres, auth: pg, command: "SELECT reverse('{{ start.secret_value }}') AS r"}
`, "leak", "command"},
		{"noop echoes it", `  - step: start
    tool: {kind: noop, echo: "${secret:api#token}"}
`, "start", "echo"},
		{"host function", `  - step: start
    tool: {kind: plainfn, value: "${secret:api#token}"}
`, "start", "value"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			sum := run(t, c.steps)
			if sum.Status != engine.StatusFailed || sum.Step != c.step || sum.Field != c.field ||
				!strings.Contains(sum.Error, "cannot be given a secret") {
				t.Fatalf("summary %+v: want failed at %s.%s, refusing the secret", sum, c.step, c.field)
			}
		})
	}
	mu.Lock()
	if len(got) != 0 {
		t.Errorf("the plain host function ran with %q", got)
	}
	mu.Unlock()

	t.Run("host function WithSecrets", func(t *testing.T) {
		sum := run(t, `  - step: start
    tool: {kind: secretfn, value: "Bearer ${secret:api#token}"}
`)
		if sum.Status != engine.StatusCompleted {
			t.Fatalf("summary %+v", sum)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 || got[0] != "Bearer "+token {
			t.Fatalf("the function got %q, want the secret", got)
		}
		data := sum.Results["start"].(map[string]any)["data"].(map[string]any)
		if data["value"] != "Bearer ${secret:api#token}" {
			t.Fatalf("result %#v, want the reference back", data)
		}
	})
}
