package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/noop"
)

// Start parses a source once: a second start of the same bytes under the
// same file name gets the playbook parsed for the first, another file
// name its own, and a source with errors is parsed (and refused) every
// time without being kept. PlaybookCache < 0 keeps nothing.
func TestStartReusesAParsedPlaybook(t *testing.T) {
	reg := tools.NewRegistry()
	reg.MustRegister("noop", noop.New())
	e, err := New(Config{Log: eventlog.NewMemory(), Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	src := []byte("workflow:\n- step: start\n  tool: {kind: noop}\n")
	a, err := e.parse("a.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := e.parse("a.yaml", src); again != a {
		t.Error("the same source was parsed again")
	}
	if other, _ := e.parse("b.yaml", src); other == a {
		t.Error("another file name got the first one's playbook (its positions name a.yaml)")
	}
	// "a.yaml" + "#\nworkflow..." and "a.yaml#" + "\nworkflow...": the
	// same bytes run together, two playbooks.
	commented := append([]byte("#\n"), src...)
	first, err := e.parse("a.yaml", commented)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := e.parse("a.yaml#", commented[1:]); err != nil || second == first {
		t.Errorf("a name and source that run together into another pair's bytes got its playbook (%v)", err)
	}
	bad := []byte("workflow:\n- step: start\n  tool: {kind: noop\n")
	for range 2 {
		var perr dsl.ErrorList
		if _, err := e.parse("bad.yaml", bad); !errors.As(err, &perr) {
			t.Fatalf("bad source: %v, want a dsl.ErrorList", err)
		}
	}
	if n := e.playbooks.Len(); n != 4 {
		t.Errorf("%d playbooks kept, want 4 (a.yaml, b.yaml and the two run-together pairs; not the bad one)", n)
	}

	// Executions started from one source share its parse.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 {
		id, err := e.Start(ctx, src, StartOptions{File: "a.yaml"})
		if err != nil {
			t.Fatal(err)
		}
		if sum, err := e.Wait(ctx, id); err != nil || sum.Status != StatusCompleted {
			t.Fatalf("Wait = %+v, %v", sum, err)
		}
	}
	if n := e.playbooks.Len(); n != 4 {
		t.Errorf("%d playbooks kept after two starts of a.yaml, want still 4", n)
	}

	off, err := New(Config{Log: eventlog.NewMemory(), Tools: reg, PlaybookCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	x, _ := off.parse("a.yaml", src)
	if y, _ := off.parse("a.yaml", src); x == nil || y == x || off.playbooks != nil {
		t.Error("PlaybookCache -1 kept a parsed playbook")
	}
}

// Executions of one source resumed from the log share one parse too:
// three recorded starts, resumed by an engine that has parsed nothing,
// leave one playbook in its cache and all three run to the end.
func TestResumeReusesAParsedPlaybook(t *testing.T) {
	reg := tools.NewRegistry()
	reg.MustRegister("noop", noop.New())
	log := eventlog.NewMemory()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := "workflow:\n- step: start\n  tool: {kind: noop}\n"
	started, err := startedJSON(startedPayload{Playbook: src, File: "a.yaml", Workload: map[string]any{}, Semantics: currentSemantics})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"resume-a", "resume-b", "resume-c"}
	for _, id := range ids {
		if _, err := log.Append(ctx, []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeExecutionStarted, Payload: started}}); err != nil {
			t.Fatal(err)
		}
	}
	e, err := New(Config{Log: log, Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, id := range ids {
		if err := e.Resume(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if sum, err := e.Wait(ctx, id); err != nil || sum.Status != StatusCompleted {
			t.Fatalf("%s: Wait = %+v, %v", id, sum, err)
		}
	}
	if n := e.playbooks.Len(); n != 1 {
		t.Errorf("%d playbooks kept after resuming three executions of one source, want 1", n)
	}
	a, err := foldParsing("x", []eventlog.Event{{ExecutionID: "x", Seq: 1, Type: eventlog.TypeExecutionStarted, Payload: started}}, e.parse)
	if err != nil {
		t.Fatal(err)
	}
	b, err := foldParsing("y", []eventlog.Event{{ExecutionID: "y", Seq: 1, Type: eventlog.TypeExecutionStarted, Payload: started}}, e.parse)
	if err != nil || a.Playbook != b.Playbook {
		t.Errorf("two folds of one recorded source got two playbooks (%v)", err)
	}
}

// The sources kept come to at most the engine's bound: the least
// recently started go first, and a source larger than the bound is not
// kept at all.
func TestPlaybookCacheIsBoundedInBytes(t *testing.T) {
	e, err := New(Config{Log: eventlog.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	src := func(note string) []byte {
		return []byte("# " + note + "\nworkflow:\n- step: start\n  tool: {kind: noop}\n")
	}
	one := int64(len(cacheKey("a.yaml", src("aaaa"))))
	e.playbookMax = 2*one + one/2
	for _, step := range []string{"aaaa", "bbbb", "cccc"} {
		if _, err := e.parse("a.yaml", src(step)); err != nil {
			t.Fatal(err)
		}
	}
	if n, b := e.playbooks.Len(), e.playbookBytes.Load(); n != 2 || b != 2*one {
		t.Errorf("%d playbooks of %d bytes kept, want 2 of %d", n, b, 2*one)
	}
	if e.playbooks.Contains(cacheKey("a.yaml", src("aaaa"))) {
		t.Error("the oldest source was kept, a newer one dropped")
	}
	long := src(strings.Repeat("x", int(e.playbookMax)))
	if _, err := e.parse("a.yaml", long); err != nil {
		t.Fatal(err)
	}
	if e.playbooks.Contains(cacheKey("a.yaml", long)) || e.playbookBytes.Load() != 2*one {
		t.Errorf("a source over the bound was kept (%d bytes kept)", e.playbookBytes.Load())
	}
}
