package keyscan_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools/internal/keyscan"
)

// TestKeys: the forms a tool reads its configuration in are all found —
// conv.String's aliases, conv.Alias, proc.WithTimeout, cfg["k"] and a
// loop over a key list — and an open read (noop ranges over its
// configuration) is a problem, not an empty list.
func TestKeys(t *testing.T) {
	t.Parallel()
	keys, problems, err := keyscan.Keys("../../http")
	if err != nil || len(problems) > 0 {
		t.Fatalf("http: %v %v", problems, err)
	}
	for _, k := range []string{"url", "endpoint", "credentials", "follow_redirects", "payload"} {
		if !slices.Contains(keys, k) {
			t.Errorf("http: %q not found in %q", k, keys)
		}
	}
	keys, _, _ = keyscan.Keys("../../python")
	for _, k := range []string{"input_data", "timeout_seconds"} {
		if !slices.Contains(keys, k) {
			t.Errorf("python: %q not found in %q", k, keys)
		}
	}
	_, problems, _ = keyscan.Keys("../../noop")
	if len(problems) != 1 || !strings.Contains(problems[0], "ranges over the configuration") {
		t.Errorf("noop: problems %q", problems)
	}
}
