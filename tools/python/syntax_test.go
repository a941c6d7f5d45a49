package python_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/python"
)

// TestSyntaxErrorShowsTheCode: a syntax error's traceback shows the
// user's line and caret, not the frames of the tool's own compiling.
// Before, it began with a frame of the standard library's ast.py.
func TestSyntaxErrorShowsTheCode(t *testing.T) {
	t.Parallel()
	out, err := python.New(python.Config{Python: interpreter(t)}).Execute(context.Background(), &tools.Call{Config: map[string]any{"code": "x = 1\ndef f(:\n  pass\n"}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	tb, _ := out.Data.(map[string]any)["traceback"].(string)
	if out.Status != tools.StatusError || !strings.Contains(tb, `File "<code>", line 2`) || !strings.Contains(tb, "def f(:") {
		t.Fatalf("status %q traceback %q, want the user's line", out.Status, tb)
	}
	if strings.Contains(tb, "ast.py") {
		t.Fatalf("traceback %q shows the tool's own frames", tb)
	}
}
