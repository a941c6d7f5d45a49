package shell_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/shell"

	"github.com/cursorflow/cursorflow/tools/internal/proc/proctest"
)

// TestStragglerHoldingOutputIsKilled: a command that exits but leaves a
// process it started holding its output (`sleep 30 & echo $!`) fails
// once the pipes are given up, and that process dies with the call.
// Before, the step failed with exec's bare "WaitDelay expired" and the
// sleep ran on, orphaned, after its step had ended.
func TestStragglerHoldingOutputIsKilled(t *testing.T) {
	t.Parallel()
	tool := shell.New(shell.Config{})
	out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"command": "sleep 30 & echo $!"}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if out.Status != tools.StatusError || !strings.Contains(out.Error, "still held its output") {
		t.Fatalf("status %q error %q, want a failure saying what held the output", out.Status, out.Error)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.Data.(map[string]any)["stdout"].(string)))
	if err != nil {
		t.Fatalf("stdout %q: %v", out.Data, err)
	}
	// The killed sleep is reaped by init (its parent, the shell, is gone).
	proctest.WaitGone(t, pid, "the process the command started")
}
