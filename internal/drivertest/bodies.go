package drivertest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// Bodies is a host tool (register [Bodies.Tool] through
// [DrainConfig.Tools]) that keeps the configuration every call of it was
// rendered with: what a loop's body was given, which a cursor loop's
// events do not record.
type Bodies struct {
	mu    sync.Mutex
	calls []map[string]any
}

// Tool returns the tool; it succeeds with no result.
func (b *Bodies) Tool() tools.Tool {
	return fn.New(func(_ context.Context, call *tools.Call) (any, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.calls = append(b.calls, maps.Clone(call.Config))
		return nil, nil
	})
}

// FailingTool is Tool, except that a call whose config holds key with
// one of the given values fails (after being kept): a body that fails
// for chosen rows.
func (b *Bodies) FailingTool(key string, fail ...any) tools.Tool {
	return fn.New(func(_ context.Context, call *tools.Call) (any, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.calls = append(b.calls, maps.Clone(call.Config))
		if slices.Contains(fail, call.Config[key]) {
			return nil, fmt.Errorf("body fails for %s %v", key, call.Config[key])
		}
		return nil, nil
	})
}

// Values returns the value of key in every call, in the order of their
// fmt form (rows run concurrently).
func (b *Bodies) Values(key string) []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]any, 0, len(b.calls))
	for _, c := range b.calls {
		out = append(out, c[key])
	}
	return sortValues(out)
}

// ClaimedValues returns the value of field of every row the frame.claimed
// events in evs recorded, decoded from the log, in the order of their fmt
// form: what a frame re-issued from the log runs with.
func ClaimedValues(t testing.TB, evs []eventlog.Event, field string) []any {
	t.Helper()
	var out []any
	for _, ev := range evs {
		if ev.Type != eventlog.TypeFrameClaimed {
			continue
		}
		var p struct {
			Rows []struct {
				Values map[string]any `json:"values"`
			} `json:"rows"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatalf("frame.claimed payload: %v", err)
		}
		for _, r := range p.Rows {
			out = append(out, r.Values[field])
		}
	}
	return sortValues(out)
}

func sortValues(vs []any) []any {
	slices.SortFunc(vs, func(a, b any) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return vs
}
