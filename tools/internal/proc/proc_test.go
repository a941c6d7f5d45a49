package proc

import (
	"context"
	"io"
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

// TestCappedThroughCopy: io.Copy into a Capped, as exec copies a child's
// output and the python tool its result, keeps the cap. Before, Copy took
// the embedded Buffer's ReadFrom, which kept everything: a chatty child
// could exhaust the worker's memory after all.
func TestCappedThroughCopy(t *testing.T) {
	t.Parallel()
	c := &Capped{Max: 5}
	n, err := io.Copy(c, strings.NewReader("abcdefgh"))
	if n != 8 || err != nil {
		t.Fatalf("Copy = %d, %v; want 8, nil", n, err)
	}
	if got := c.String(); got != "abcde" || c.Dropped != 3 {
		t.Fatalf("kept %q, dropped %d; want %q, 3", got, c.Dropped, "abcde")
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

func TestLines(t *testing.T) {
	t.Parallel()
	var lines []string
	var all strings.Builder
	l := &Lines{W: &all, Line: func(s string) { lines = append(lines, s) }}
	for _, s := range []string{"a", "b\nc", "\r\n", "\n\nlong" + strings.Repeat("x", maxLine), "tail"} {
		if n, err := l.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	l.Flush()
	want := []string{"ab", "c", "", "", "long" + strings.Repeat("x", maxLine-4), "xxxxtail"}
	if len(lines) != len(want) {
		t.Fatalf("lines %d, want %d", len(lines), len(want))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Fatalf("line %d = %.20q (len %d), want %.20q (len %d)", i, lines[i], len(lines[i]), want[i], len(want[i]))
		}
	}
	if all.Len() != len("ab\nc\r\n\n\nlong")+maxLine+len("tail") {
		t.Fatalf("passed on %d bytes", all.Len())
	}
}
