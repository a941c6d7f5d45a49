package engine

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind    string
		delay   time.Duration
		attempt int
		want    time.Duration
	}{
		{dsl.BackoffNone, time.Second, 3, 0},
		{dsl.BackoffFixed, time.Second, 1, time.Second},
		{dsl.BackoffFixed, time.Second, 5, time.Second},
		{dsl.BackoffLinear, time.Second, 3, 3 * time.Second},
		{dsl.BackoffExponential, 500 * time.Millisecond, 1, 500 * time.Millisecond},
		{dsl.BackoffExponential, 500 * time.Millisecond, 4, 4 * time.Second},
		{dsl.BackoffExponential, time.Second, 40, maxBackoff},
		{"", 2 * time.Second, 2, 2 * time.Second},
	} {
		a := &dsl.Action{Do: dsl.DoRetry, Backoff: tc.kind, Delay: tc.delay}
		if got := backoff(a, tc.attempt); got != tc.want {
			t.Errorf("backoff(%s, %v, attempt %d) = %v, want %v", tc.kind, tc.delay, tc.attempt, got, tc.want)
		}
	}
	if got := retryAttempts(&dsl.Action{}); got != 3 {
		t.Errorf("default attempts = %d, want 3", got)
	}
}

func TestCommandIDRoundTrip(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"start#1", "loop#2/i10", "fetch#3/s0.f12", "a@b#1"} {
		b, n, ok := splitCommandID(commandID(base, 7))
		if !ok || b != base || n != 7 {
			t.Errorf("split(commandID(%q, 7)) = %q, %d, %v", base, b, n, ok)
		}
	}
	if _, _, ok := splitCommandID("no-attempt"); ok {
		t.Error("an id without @attempt was accepted")
	}
}

func TestMustJSONKeepsNonFiniteValues(t *testing.T) {
	t.Parallel()
	b := mustJSON(completedPayload{Output: map[string]any{"data": map[string]any{"x": math.Inf(1)}}, Ms: 3})
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("mustJSON gave invalid JSON %s: %v", b, err)
	}
	x := back["output"].(map[string]any)["data"].(map[string]any)["x"]
	if x != "+Inf" || back["ms"] != float64(3) {
		t.Fatalf("mustJSON = %s, want x recorded as +Inf (a string) and ms kept", b)
	}
}
