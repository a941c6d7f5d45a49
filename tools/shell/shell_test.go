package shell_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/shell"
)

func TestExecute(t *testing.T) {
	t.Parallel()
	tool := shell.New(shell.Config{})
	dir := t.TempDir()
	tests := []struct {
		name   string
		config map[string]any
		status string
		stdout string
		code   int
		errHas string
	}{
		{"string through sh", map[string]any{"command": "echo hello | tr a-z A-Z"}, tools.StatusSuccess, "HELLO\n", 0, ""},
		{"argv list without shell", map[string]any{"cmd": []any{"printf", "%s-%s", "a b", 2.0}}, tools.StatusSuccess, "a b-2", 0, ""},
		{"env and dir", map[string]any{"command": `printf '%s %s' "$GREETING" "$(pwd)"`, "env": map[string]any{"GREETING": "hi"}, "dir": dir}, tools.StatusSuccess, "hi " + dir, 0, ""},
		{"non-zero exit", map[string]any{"command": "echo oops >&2; exit 4"}, tools.StatusError, "", 4, "oops"},
		{"timeout", map[string]any{"command": "sleep 20", "timeout": 0.3}, tools.StatusError, "", -1, "deadline"},
		{"missing program", map[string]any{"command": []any{"/nonexistent/prog"}}, tools.StatusError, "", -1, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := tool.Execute(context.Background(), &tools.Call{Config: tt.config})
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if out.Status != tt.status {
				t.Fatalf("status %q (error %q), want %q", out.Status, out.Error, tt.status)
			}
			d := out.Data.(map[string]any)
			if d["stdout"] != tt.stdout || d["exit_code"] != tt.code {
				t.Errorf("data %#v, want stdout %q exit %d", d, tt.stdout, tt.code)
			}
			if !strings.Contains(out.Error, tt.errHas) {
				t.Errorf("error %q lacks %q", out.Error, tt.errHas)
			}
		})
	}
	if _, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"command": " "}}); !errors.Is(err, shell.ErrBadConfig) {
		t.Errorf("empty command: %v", err)
	}
}
