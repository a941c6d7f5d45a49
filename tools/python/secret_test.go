package python_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/python"
)

// TestSecretCutInErrorIsConcealed: code that dies with the secret on
// stderr past the error's quoting limit (2048 bytes) must not leave the
// secret's start in the recorded error, nor the secret in the debug log.
// Before, the error quoted stderr cut at 2048 bytes, "aaa…SuperSecretT…",
// which the worker's concealing could no longer recognise, and the log
// got stdout and stderr as they were.
func TestSecretCutInErrorIsConcealed(t *testing.T) {
	t.Parallel()
	const secret = "SuperSecretTokenValue123"
	revealed := []tools.Revealed{{Ref: tools.SecretRef("apitok", ""), Secret: secret}}
	var logged bytes.Buffer
	tool := python.New(python.Config{Python: interpreter(t)})
	out, err := tool.Execute(context.Background(), &tools.Call{
		Config: map[string]any{
			"code":  "import os, sys\nprint(token)\nsys.stdout.flush()\nsys.stderr.write('a' * 2040 + token)\nsys.stderr.flush()\nos._exit(1)\n",
			"input": map[string]any{"token": secret},
		},
		Revealed: revealed,
		Logger:   slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if out.Status != tools.StatusError {
		t.Fatalf("status %q, want error", out.Status)
	}
	// What the worker records: the output with the secrets concealed.
	b, err := json.Marshal(tools.ConcealSecrets(out.Map(), revealed))
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(string(b), secret[:6]); i >= 0 {
		t.Fatalf("the recorded output holds the start of the secret: %s", b[max(0, i-20):])
	}
	if strings.Contains(logged.String(), secret[:6]) {
		t.Fatalf("the debug log holds the secret: %s", logged.String())
	}
}
