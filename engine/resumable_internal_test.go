package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// TestResumableFollowsEveryTransition: the index of commands with
// something to decide (State.resumable), kept from the first event on,
// matches a scan of the commands after every event of histories that
// schedule, wait for and run retries, in a step and in a loop's items.
func TestResumableFollowsEveryTransition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	calls := map[string]int{}
	reg := tools.NewRegistry()
	// flaky fails its first two calls per key, then succeeds.
	reg.MustRegister("flaky", tools.ToolFunc(func(_ context.Context, c *tools.Call) (tools.Output, error) {
		mu.Lock()
		defer mu.Unlock()
		k := c.Step + "/" + fmt.Sprint(c.Config["key"])
		calls[k]++
		if calls[k] <= 2 {
			return tools.Output{Status: tools.StatusError, Error: "not yet"}, nil
		}
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	log := eventlog.NewMemory()
	e, err := New(Config{Log: log, Tools: reg, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const retry = `
      spec:
        policy:
          rules:
            - when: "{{ output.status == 'error' }}"
              then: {do: retry, attempts: 4, delay: 0.01}
`
	src := "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t}\nworkflow:\n" +
		"  - step: start\n    tool:\n      kind: flaky\n      key: one" + retry +
		"    next: [items]\n" +
		"  - step: items\n    loop:\n      in: '{{ [1, 2, 3] }}'\n      iterator: i\n      spec: {mode: parallel}\n" +
		"    tool:\n      kind: flaky\n      key: '{{ iter.i }}'" + retry
	id, err := e.Start(ctx, []byte(src), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != StatusCompleted {
		t.Fatalf("%v %+v", err, sum)
	}
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	st := NewState(id)
	st.resumableBases() // kept from here on, not rebuilt
	seen := map[string]bool{}
	for i, ev := range evs {
		if err := st.Apply(ev); err != nil {
			t.Fatalf("event %d (%s): %v", i, ev.Type, err)
		}
		want := map[string]bool{}
		for base, c := range st.Commands {
			if resumableStatus(c.Status) {
				want[base] = true
				seen[c.Status] = true
			}
		}
		if len(want) != len(st.resumable) {
			t.Fatalf("after event %d (%s): index %v, commands %v", i, ev.Type, st.resumable, want)
		}
		for base := range st.resumable {
			if !want[base] {
				t.Fatalf("after event %d (%s): index %v, commands %v", i, ev.Type, st.resumable, want)
			}
		}
	}
	if !seen[cmdRetryWanted] || !seen[cmdRetryWaiting] {
		t.Fatalf("the histories went through %v, want retry_wanted and retry_waiting", seen)
	}
}
