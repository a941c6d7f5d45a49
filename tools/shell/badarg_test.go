package shell_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/shell"
)

// TestUnpassableConfigIsNamed: a command or an environment no process
// can be given (a NUL byte, which YAML's "\0" writes; a variable name
// with "=" in it) is refused naming the key. Before, a NUL in the
// command failed as "fork/exec /bin/sh: invalid argument", and env
// {"A=B": 1} set A to "B=1".
func TestUnpassableConfigIsNamed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		config map[string]any
		want   string
	}{
		{map[string]any{"command": "echo a\x00b"}, "command"},
		{map[string]any{"command": []any{"echo", "a\x00b"}}, "command"},
		{map[string]any{"command": "true", "env": map[string]any{"A=B": 1}}, `env "A=B"`},
		{map[string]any{"command": "true", "env": map[string]any{"": 1}}, `env ""`},
		{map[string]any{"command": "true", "env": map[string]any{"X": "a\x00b"}}, `env "X"`},
	} {
		_, err := shell.New(shell.Config{}).Execute(context.Background(), &tools.Call{Config: tt.config})
		if !errors.Is(err, shell.ErrBadConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("config %q: error %v, want ErrBadConfig naming %s", tt.config, err, tt.want)
		}
	}
}
