package main

import (
	"slices"
	"strings"
	"testing"
)

func names(ms []mode) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.name)
	}
	return strings.Join(s, " ")
}

// Every engine mode runs once per run, beside its base: the base before
// and after it, nats-frame beside its frame; every run rotates.
func TestSchedule(t *testing.T) {
	c := config{logs: []string{"sqlite", "postgres"}, nats: true, riverWorkers: 100}
	modes, err := modesOf(c)
	if err != nil {
		t.Fatal(err)
	}
	for run := range 3 {
		order := schedule(modes, run, 3)
		t.Logf("run %d: %s", run, names(order))
		count := map[string]int{}
		for i, m := range order {
			count[m.name]++
			if !m.engine() || m.base == "" {
				continue
			}
			prev, next := "", ""
			if i > 0 {
				prev = order[i-1].name
			}
			if i+1 < len(order) {
				next = order[i+1].name
			}
			if m.kind == "nats-frame" {
				if prev != m.base && next != m.base {
					t.Errorf("run %d: %s not beside %s: %s", run, m.name, m.base, names(order))
				}
				continue
			}
			// The base is just before, or before the nats-frame pair.
			if prev != m.base && (i < 2 || order[i-2].name != m.base) {
				t.Errorf("run %d: %s without %s before it: %s", run, m.name, m.base, names(order))
			}
		}
		for _, m := range modes {
			want := 1
			if !m.engine() && m.kind != "river" {
				want = 3 // before, between and after two engine modes
			}
			if count[m.name] != want {
				t.Errorf("run %d: %s ran %d times, want %d", run, m.name, count[m.name], want)
			}
		}
	}
	if names(schedule(modes, 0, 3)) == names(schedule(modes, 1, 3)) {
		t.Error("runs 0 and 1 have the same order")
	}
}

// A base and an engine mode measured around it: the engine mode is
// compared with the mean of the base's drains beside it in its own run.
func TestBaseRate(t *testing.T) {
	bases := []result{
		{n: 100, seconds: 1, run: 0, pos: 0},   // 100/s
		{n: 100, seconds: 0.5, run: 0, pos: 2}, // 200/s
		{n: 100, seconds: 0.1, run: 1, pos: 1}, // another run
	}
	if got, ok := baseRate(bases, result{run: 0, pos: 1}); !ok || got != 150 {
		t.Errorf("between: %v %v, want 150", got, ok)
	}
	if got, ok := baseRate(bases, result{run: 0, pos: 3}); !ok || got != 200 {
		t.Errorf("after the last: %v %v, want 200", got, ok)
	}
	if _, ok := baseRate(bases, result{run: 2, pos: 0}); ok {
		t.Error("a base from another run")
	}
}

// Modes picked with -modes still run once each, a base only around the
// engine modes picked with it, and a mode whose base is not picked alone.
func TestScheduleOfPickedModes(t *testing.T) {
	c := config{logs: []string{"sqlite", "postgres"}, nats: true,
		only: []string{"baseline-row", "row/postgres", "frame/sqlite", "nats-frame/sqlite", "nats-frame/postgres"}}
	modes, err := modesOf(c)
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		got := names(schedule(modes, run, 2))
		f := strings.Fields(got)
		count := map[string]int{}
		for _, name := range f {
			count[name]++
		}
		want := map[string]int{"baseline-row": 2, "row/postgres": 1, "frame/sqlite": 1, "nats-frame/sqlite": 1, "nats-frame/postgres": 1}
		for name, n := range want {
			if count[name] != n {
				t.Errorf("run %d: %s ran %d times, want %d: %s", run, name, count[name], n, got)
			}
		}
		i := slices.Index(f, "nats-frame/sqlite")
		before := i > 0 && f[i-1] == "frame/sqlite"
		after := i+1 < len(f) && f[i+1] == "frame/sqlite"
		if !before && !after {
			t.Errorf("run %d: nats-frame/sqlite not beside frame/sqlite: %s", run, got)
		}
	}
}
