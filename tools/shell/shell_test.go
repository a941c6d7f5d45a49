package shell_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// TestPartialLines: each line of output reaches the call's Partial
// receiver while the command still runs (the command waits for a file the
// receiver creates on the first line), in order, stderr apart, and a
// last line without a newline too.
func TestPartialLines(t *testing.T) {
	t.Parallel()
	tool := shell.New(shell.Config{})
	gate := filepath.Join(t.TempDir(), "gate")
	var mu sync.Mutex
	var got []map[string]any
	call := &tools.Call{
		Config: map[string]any{
			"command": `echo first; echo warn >&2; while [ ! -e "$GATE" ]; do sleep 0.01; done; echo second; printf last`,
			"env":     map[string]any{"GATE": gate},
		},
		Partial: func(data any) {
			m := data.(map[string]any)
			mu.Lock()
			got = append(got, m)
			mu.Unlock()
			if m["line"] == "first" {
				if err := os.WriteFile(gate, nil, 0o600); err != nil {
					t.Error(err)
				}
			}
		},
	}
	out, err := tool.Execute(context.Background(), call)
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("Execute = %+v, %v", out, err)
	}
	var stdout []string
	var stderr []string
	for _, m := range got {
		switch m["stream"] {
		case "stdout":
			stdout = append(stdout, m["line"].(string))
		case "stderr":
			stderr = append(stderr, m["line"].(string))
		default:
			t.Fatalf("partial %v names no stream", m)
		}
	}
	if strings.Join(stdout, "|") != "first|second|last" || strings.Join(stderr, "|") != "warn" {
		t.Fatalf("partials: stdout %q, stderr %q", stdout, stderr)
	}
	if d := out.Data.(map[string]any); d["stdout"] != "first\nsecond\nlast" {
		t.Fatalf("the result keeps the whole output: %q", d["stdout"])
	}
}

// TestTimeoutIsMarked: a command its own timeout stops says so in its
// data (timeout: true), as the http and postgres tools do, so that a
// policy rule on output.error.kind == 'timeout' matches it. Before, it was
// kind error, and such a rule never retried it.
func TestTimeoutIsMarked(t *testing.T) {
	t.Parallel()
	out, err := shell.New(shell.Config{}).Execute(context.Background(), &tools.Call{Config: map[string]any{"command": "sleep 20", "timeout": 0.2}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if out.Status != tools.StatusError || out.Data.(map[string]any)["timeout"] != true {
		t.Fatalf("status %q data %v, want an error marked timeout", out.Status, out.Data)
	}
	// The error says how long the command had, not just that a context ended.
	if want := "shell: timed out after 200ms: context deadline exceeded"; !strings.HasPrefix(out.Error, want) {
		t.Fatalf("error %q, want it to begin %q", out.Error, want)
	}
}

// TestTruncatedOutputIsMarked: output past the cap is dropped, and the
// data says so (stdout_truncated), so that a later step reading stdout
// can tell a cut document from a whole one. Before, nothing did.
func TestTruncatedOutputIsMarked(t *testing.T) {
	t.Parallel()
	out, err := shell.New(shell.Config{MaxOutput: 10}).Execute(context.Background(), &tools.Call{Config: map[string]any{"command": "echo 0123456789abcdef; echo short >&2"}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	d := out.Data.(map[string]any)
	if out.Status != tools.StatusSuccess || d["stdout"] != "0123456789" || d["stdout_truncated"] != true {
		t.Fatalf("status %q data %v, want stdout cut at 10 bytes and marked", out.Status, d)
	}
	if _, marked := d["stderr_truncated"]; marked {
		t.Fatalf("data %v: stderr was not cut", d)
	}
}
