package shell_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/shell"
)

// TestMissingDirIsNamed: a task whose dir does not exist (or is a file)
// fails naming the directory. Before, the error was exec's "fork/exec
// /bin/sh: no such file or directory", which reads as a missing shell.
func TestMissingDirIsNamed(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		out, err := shell.New(shell.Config{}).Execute(context.Background(), &tools.Call{Config: map[string]any{"command": "pwd", "dir": dir}})
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if out.Status != tools.StatusError || !strings.Contains(out.Error, "working directory "+dir) {
			t.Fatalf("dir %s: status %q error %q, want a failure naming the working directory", dir, out.Status, out.Error)
		}
	}
}
