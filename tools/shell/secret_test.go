package shell_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/shell"
)

// secret is what a secrets step's reference reveals to the shell task.
const secret = "SuperSecretTokenValue123"

var revealed = []tools.Revealed{{Ref: tools.SecretRef("apitok", ""), Secret: secret}}

// recorded is what the worker records of out: the output with the
// revealed secrets concealed again (tools.ConcealSecrets), as JSON.
func recorded(t *testing.T, out tools.Output) string {
	t.Helper()
	b, err := json.Marshal(tools.ConcealSecrets(out.Map(), revealed))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// leaks reports whether s holds the start of the secret: a secret cut in
// two is not concealed, and its first part is most of it.
func leaks(s string) bool { return strings.Contains(s, secret[:6]) }

// TestSecretCutInErrorIsConcealed: a failing command whose stderr echoes
// the secret past the error's quoting limit (512 bytes) must not leave
// the secret's start in the recorded error. Before, the error quoted
// stderr cut at 512 bytes, "aaa…SuperSecretT…", which the worker's
// concealing could no longer recognise: the start of the secret reached
// the event log and the terminal.
func TestSecretCutInErrorIsConcealed(t *testing.T) {
	t.Parallel()
	out, err := shell.New(shell.Config{}).Execute(context.Background(), &tools.Call{
		Config: map[string]any{
			"command": `head -c 500 /dev/zero | tr '\0' a >&2; echo "$TOKEN" >&2; exit 1`,
			"env":     map[string]any{"TOKEN": secret},
		},
		Revealed: revealed,
	})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if out.Status != tools.StatusError {
		t.Fatalf("status %q, want error", out.Status)
	}
	if rec := recorded(t, out); leaks(rec) {
		t.Fatalf("the recorded output holds the start of the secret: %s", rec[max(0, strings.Index(rec, secret[:6])-20):])
	}
}

// TestSecretCutAtMaxOutputIsDropped: output capped in the middle of the
// secret keeps none of it. Before, stdout kept "aaaaaSuper".
func TestSecretCutAtMaxOutputIsDropped(t *testing.T) {
	t.Parallel()
	out, err := shell.New(shell.Config{MaxOutput: 10}).Execute(context.Background(), &tools.Call{
		Config: map[string]any{
			"command": `printf 'aaaaa%s' "$TOKEN"; printf 'bbbbbb%s' "$TOKEN" >&2`,
			"env":     map[string]any{"TOKEN": secret},
		},
		Revealed: revealed,
	})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if rec := recorded(t, out); leaks(rec) || strings.Contains(rec, secret[:4]) {
		t.Fatalf("the recorded output holds the start of the secret: %s", rec)
	}
	d := out.Data.(map[string]any)
	if d["stdout"] != "aaaaa" || d["stdout_truncated"] != true || d["stderr"] != "bbbbbb" || d["stderr_truncated"] != true {
		t.Fatalf("data %v, want the streams cut before the secret and marked", d)
	}
}

// TestSecretAcrossALongLineIsConcealed: a line longer than the partial
// results' piece size (64 KiB) is handed on in pieces; a secret across
// a piece boundary must reach the engine's concealing whole. Before, it
// was cut in two, and each half was recorded as it was.
func TestSecretAcrossALongLineIsConcealed(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var lines []string
	out, err := shell.New(shell.Config{}).Execute(context.Background(), &tools.Call{
		Config: map[string]any{
			"command": `head -c 65530 /dev/zero | tr '\0' a; echo "$TOKEN"`,
			"env":     map[string]any{"TOKEN": secret},
		},
		Revealed: revealed,
		// As the engine's partial function does: conceal, then record.
		Partial: func(data any) {
			b, _ := json.Marshal(tools.ConcealSecrets(data, revealed))
			mu.Lock()
			lines = append(lines, string(b))
			mu.Unlock()
		},
	})
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("Execute = %v, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) < 2 {
		t.Fatalf("%d partial results, want the line in pieces", len(lines))
	}
	for i, l := range lines {
		if leaks(l) || strings.Contains(l, secret[len(secret)-6:]) {
			t.Fatalf("partial %d holds part of the secret: …%s", i, l[max(0, len(l)-80):])
		}
	}
}

// TestMultilineSecretInPartialsIsConcealed: a secret of several lines (a
// PEM key, a certificate) that the command prints reaches the partial
// results line by line; no line of it may be recorded. Before, each line
// was handed on as it was, and the engine's concealing, which looks for
// the whole secret, recognised none of them: `cat key.pem` put the key
// in the event log, one call.partial at a time.
func TestMultilineSecretInPartialsIsConcealed(t *testing.T) {
	t.Parallel()
	const key = "-----BEGIN KEY-----\nMIIBVwIBADANBgkq\nhkiG9w0BAQEFAASC\n-----END KEY-----"
	revealed := []tools.Revealed{{Ref: tools.SecretRef("pem", "key"), Secret: key}}
	var mu sync.Mutex
	var partials []string
	out, err := shell.New(shell.Config{}).Execute(context.Background(), &tools.Call{
		Config: map[string]any{
			"command": `echo before; printf 'key: %s tail\n' "$KEY"; printf '%s\n' "$KEY"; echo after`,
			"env":     map[string]any{"KEY": key},
		},
		Revealed: revealed,
		Partial: func(data any) {
			b, _ := json.Marshal(tools.ConcealSecrets(data, revealed))
			mu.Lock()
			partials = append(partials, string(b))
			mu.Unlock()
		},
	})
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("Execute = %v, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(partials, "\n")
	for _, frag := range []string{"BEGIN KEY", "MIIBVwIBADANBgkq", "hkiG9w0BAQEFAASC", "END KEY"} {
		if strings.Contains(all, frag) {
			t.Fatalf("the partial results hold %q of the secret:\n%s", frag, all)
		}
	}
	for _, keep := range []string{`"line":"before"`, `"line":"after"`, `tail`} {
		if !strings.Contains(all, keep) {
			t.Fatalf("the partial results lost %s:\n%s", keep, all)
		}
	}
	if rec, _ := json.Marshal(tools.ConcealSecrets(out.Map(), revealed)); strings.Contains(string(rec), "MIIB") {
		t.Fatalf("the recorded output holds the secret: %s", rec)
	}
}
