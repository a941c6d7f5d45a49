package tools_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/tools"
)

// TestConcealSecretsSurvivesACycle: a tool's output that refers back to
// itself (a host function can return one) is concealed without
// overflowing the stack; what is left is for the engine's encoding to
// refuse.
func TestConcealSecretsSurvivesACycle(t *testing.T) {
	t.Parallel()
	cyc := map[string]any{"token": "s3cr3t-value"}
	cyc["self"] = cyc
	list := []any{"s3cr3t-value", nil}
	list[1] = list
	revealed := []tools.Revealed{{Ref: "${secret:api#token}", Secret: "s3cr3t-value"}}
	got, ok := tools.ConcealSecrets(cyc, revealed).(map[string]any)
	if !ok || got["token"] != "${secret:api#token}" {
		t.Fatalf("concealed %v", got["token"])
	}
	if l, ok := tools.ConcealSecrets(list, revealed).([]any); !ok || l[0] != "${secret:api#token}" {
		t.Fatalf("concealed list %v", l[0])
	}
}
