package python_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/python"
)

// TestMissingDirIsNamed: a Config.Dir that does not exist fails the call
// naming the directory. Before, the error was exec's "start python3:
// fork/exec /usr/bin/python3: no such file or directory", which reads as
// a missing interpreter.
func TestMissingDirIsNamed(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "missing")
	out, err := python.New(python.Config{Python: interpreter(t), Dir: dir}).Execute(context.Background(), &tools.Call{Config: map[string]any{"code": "result = 1"}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if out.Status != tools.StatusError || !strings.Contains(out.Error, "working directory "+dir) {
		t.Fatalf("status %q error %q, want a failure naming the working directory", out.Status, out.Error)
	}
}
