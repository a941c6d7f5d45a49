package tools_test

import (
	"context"
	"slices"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
)

type keyed struct{ tools.ToolFunc }

func (keyed) ConfigKeys() []string { return []string{"url"} }

// TestConfigKeys: a tool's keys are known only when it lists them.
func TestConfigKeys(t *testing.T) {
	t.Parallel()
	run := tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) { return tools.Output{}, nil })
	if keys, ok := tools.ConfigKeys(run); ok || keys != nil {
		t.Fatalf("a plain tool lists %q, %v", keys, ok)
	}
	keys, ok := tools.ConfigKeys(keyed{run})
	if !ok || !slices.Equal(keys, []string{"url"}) {
		t.Fatalf("keys %q, %v", keys, ok)
	}
}
