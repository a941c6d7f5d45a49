package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/noop"
	"github.com/cursorflow/cursorflow/tools/playbook"
)

// A child's end resumes the command parked on it found through
// State.awaiters, kept as commands park (from the first event) or built
// from Commands when first needed: both answer what a scan of every
// command does, for every child of a real fan-out, and hold nothing once
// every child has been answered.
func TestAwaitersFollowTheParkedCommands(t *testing.T) {
	dir := t.TempDir()
	child := "workflow:\n- step: start\n  tool: {kind: noop}\n"
	if err := os.WriteFile(filepath.Join(dir, "child.yaml"), []byte(child), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	reg.MustRegister("noop", noop.New())
	log := eventlog.NewMemory()
	e, err := New(Config{Log: log, Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reg.MustRegister("playbook", playbook.New(e))
	parent := "workflow:\n- step: start\n  loop: {in: '{{ range(6) | list }}', iterator: i, spec: {mode: parallel}}\n" +
		"  tool: {kind: playbook, path: child.yaml}\n"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := e.Start(ctx, []byte(parent), StartOptions{File: filepath.Join(dir, "parent.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := e.Wait(ctx, id); err != nil || sum.Status != StatusCompleted {
		t.Fatalf("Wait = %+v, %v", sum, err)
	}
	events, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The history up to its first await.done: every child parked on.
	cut := slices.IndexFunc(events, func(ev eventlog.Event) bool { return ev.Type == eventlog.TypeAwaitDone })
	if cut < 0 {
		t.Fatal("no await.done in the parent's history")
	}
	kept, built := NewState(id), NewState(id)
	kept.awaiters = map[string][]string{}
	for _, ev := range events[:cut] {
		if err := kept.Apply(ev); err != nil {
			t.Fatal(err)
		}
		if err := built.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	awaited := kept.Awaiting()
	if len(awaited) == 0 {
		t.Fatal("no command parked before the first await.done")
	}
	children := slices.Sorted(func(yield func(string) bool) {
		for _, c := range awaited {
			if !yield(c) {
				return
			}
		}
	})
	for _, childID := range children {
		// What a scan of every command finds: the first parked on it.
		want := ""
		for cmd, on := range built.Awaiting() {
			if on == childID && (want == "" || cmd < want) {
				want = cmd
			}
		}
		for name, s := range map[string]*State{"kept": kept, "built": built} {
			ev, ok := s.awaitDone(childID, StatusCompleted, time.Now())
			if !ok || ev.CommandID != want {
				t.Errorf("%s: the end of %s resumed %q (%v), want %q", name, childID, ev.CommandID, ok, want)
			}
			if _, again := s.awaitDone(childID, StatusCompleted, time.Now()); again {
				t.Errorf("%s: the end of %s resumed a second command", name, childID)
			}
		}
	}
	for name, s := range map[string]*State{"kept": kept, "built": built} {
		if len(s.awaiters) != 0 || len(s.Awaiting()) != 0 {
			t.Errorf("%s: %d children still listed, %d commands parked", name, len(s.awaiters), len(s.Awaiting()))
		}
	}
}
