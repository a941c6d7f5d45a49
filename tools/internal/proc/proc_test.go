package proc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/tools"
)

func TestCapped(t *testing.T) {
	t.Parallel()
	c := &Capped{Max: 5}
	for _, s := range []string{"abc", "defg", "h"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := c.String(); got != "abcde" {
		t.Fatalf("kept %q, want %q", got, "abcde")
	}
}

func TestWithTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel, err := WithTimeout(context.Background(), map[string]any{"timeout_seconds": 30})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > 30*time.Second || time.Until(dl) < 20*time.Second {
		t.Fatalf("deadline %v, %v: want about 30s from now", dl, ok)
	}
	ctx, cancel, err = WithTimeout(context.Background(), map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("deadline set without a timeout")
	}
	if _, _, err := WithTimeout(context.Background(), map[string]any{"timeout": "soon"}); err == nil {
		t.Fatal("want an error for an unreadable timeout")
	}
}

func TestEnvironDropsCredentials(t *testing.T) {
	t.Setenv(tools.EnvCredentialPrefix+"PROC_TEST", "value-9f3a1c")
	t.Setenv("CURSORFLOW_PROC_TEST_KEEP", "1")
	env := strings.Join(Environ(), "\n")
	if strings.Contains(env, "PROC_TEST=value-9f3a1c") {
		t.Fatal("a credential variable reached the child's environment")
	}
	if !strings.Contains(env, "CURSORFLOW_PROC_TEST_KEEP=1") {
		t.Fatal("an ordinary variable was dropped")
	}
}
