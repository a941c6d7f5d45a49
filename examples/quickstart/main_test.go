package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestQuickstartDrainsThenHasNothingLeft runs the quickstart twice on the
// same directory, as a user would: the first run drains every job, the
// second finds nothing to do.
func TestQuickstartDrainsThenHasNothingLeft(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if code := run([]string{"-n", "1500", "-dir", dir, "-quiet"}, &out, &out); code != 0 {
		t.Fatalf("first run exited %d:\n%s", code, out.String())
	}
	first := out.String()
	for _, want := range []string{"1500 jobs, 1500 pending", "items           1500 (1500 ok, 0 failed, 0 dead-lettered)", "events per item", "event log"} {
		if !strings.Contains(first, want) {
			t.Fatalf("first run's output lacks %q:\n%s", want, first)
		}
	}
	out.Reset()
	if code := run([]string{"-dir", dir, "-quiet"}, &out, &out); code != 0 {
		t.Fatalf("second run exited %d:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "nothing left to do") {
		t.Fatalf("second run did not report an empty queue:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"-print"}, &out, &out); code != 0 || !strings.Contains(out.String(), "kind: sqlite") {
		t.Fatalf("-print exited %d:\n%s", code, out.String())
	}
}
