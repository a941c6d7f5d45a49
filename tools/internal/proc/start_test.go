package proc

import (
	"context"
	"strings"
	"testing"
)

// TestStartLeavesSharedEnvAlone: Start adds its marker to a copy of the
// environment, never into spare room of the slice the tool shares
// between concurrent calls, and each call's marker is its own.
func TestStartLeavesSharedEnvAlone(t *testing.T) {
	t.Parallel()
	base := append(make([]string, 0, 8), "A=1")
	var markers []string
	for range 2 {
		cmd := Command(context.Background(), "true")
		cmd.Env = base
		if err := Start(cmd, nil); err != nil {
			t.Fatal(err)
		}
		if err := Wait(cmd); err != nil {
			t.Fatal(err)
		}
		last := cmd.Env[len(cmd.Env)-1]
		if !strings.HasPrefix(last, MarkerPrefix) {
			t.Fatalf("env %q lacks the marker", cmd.Env)
		}
		markers = append(markers, last)
	}
	if spare := base[:2][1]; spare != "" {
		t.Fatalf("Start wrote %q into the shared slice's spare room", spare)
	}
	if markers[0] == markers[1] {
		t.Fatalf("two calls share the marker %q", markers[0])
	}
}

func TestSecretStart(t *testing.T) {
	t.Parallel()
	secrets := []string{"hunter2", "xyz"}
	for s, want := range map[string]int{"abc": 0, "abchun": 3, "abchunter2": 0, "abxy": 2, "h": 1, "": 0} {
		if got := secretStart([]byte(s), secrets); got != want {
			t.Errorf("secretStart(%q) = %d, want %d", s, got, want)
		}
	}
}
