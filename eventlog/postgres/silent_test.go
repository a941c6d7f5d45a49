package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestSilentServerFailsTheCall: a server that stops answering with the
// connection still open (a frozen server, a path a firewall or a
// failover black-holed) fails an append and a read within
// OperationTimeout, as unavailable and saying so. They waited for as
// long as the connection looked alive: a CLI run, or a server's every
// execution, stood still without a word. Once the server answers again
// the next append goes through and the log holds each event once, in
// order.
func TestSilentServerFailsTheCall(t *testing.T) {
	schema := randomSchema(t, testPool(t))
	proxy, viaProxy := testenv.NewURLProxy(t, testenv.Postgres(t))
	const bound = time.Second
	log, err := postgres.Open(t.Context(), viaProxy, postgres.Config{Schema: schema, OperationTimeout: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = log.Close() }()
	ev := func(step string) eventlog.Event {
		return eventlog.Event{ExecutionID: "x", Type: eventlog.TypeStepCompleted, Step: step}
	}
	if _, err := log.Append(t.Context(), []eventlog.Event{ev("before")}); err != nil {
		t.Fatal(err)
	}

	proxy.Hole()
	// The caller's own deadline is far beyond the bound: a call that
	// ends with it was never bounded.
	ctx, cancel := context.WithTimeout(t.Context(), 20*bound)
	defer cancel()
	_, appendErr := log.Append(ctx, []eventlog.Event{ev("during")})
	readStart := time.Now()
	_, readErr := log.Read(ctx, "x", 0, 0)
	// A read that lost its session runs once more (reread), but not one
	// that ran out of its bound: that would take the bound twice.
	if d := time.Since(readStart); d >= 2*bound {
		t.Errorf("the read through a silent connection took %v, twice its bound or more", d)
	}
	for op, err := range map[string]error{"append": appendErr, "read": readErr} {
		switch {
		case err == nil:
			t.Errorf("%s through a silent connection: no error", op)
		case ctx.Err() != nil:
			t.Fatalf("%s through a silent connection waited past its bound: %v", op, err)
		case !errors.Is(err, eventlog.ErrUnavailable) || !strings.Contains(err.Error(), "no answer within 1s"):
			t.Errorf("%s through a silent connection: %v; want eventlog.ErrUnavailable saying no answer within 1s", op, err)
		}
	}
	if proxy.Held() == 0 {
		t.Fatal("nothing went into the hole: the calls did not reach the proxy")
	}

	proxy.Resume()
	if _, err := log.Append(t.Context(), []eventlog.Event{ev("after")}); err != nil {
		t.Fatalf("append once the server answers again: %v", err)
	}
	got, err := log.Read(t.Context(), "x", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d", i, e.Seq)
		}
		steps = append(steps, e.Step)
	}
	// The silent append was sent and never answered: the server may have
	// stored it; it must not have stored it twice or out of order.
	if s := strings.Join(steps, ","); s != "before,after" && s != "before,during,after" {
		t.Errorf("log holds %s, want before,[during,]after", s)
	}
}

// TestReadInPages: a read longer than one page (limit 0, or a limit
// above the page) comes back whole and in order, each page its own
// bounded statement.
func TestReadInPages(t *testing.T) {
	pool := testPool(t)
	log := newLog(t, pool, randomSchema(t, pool))
	const total = 12001
	batch := make([]eventlog.Event, 0, 1000)
	for i := range total {
		batch = append(batch, eventlog.Event{ExecutionID: "long", Type: eventlog.TypeStepCompleted, Step: "s"})
		if len(batch) == cap(batch) || i == total-1 {
			if _, err := log.Append(t.Context(), batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	for _, c := range []struct {
		after        int64
		limit, count int
	}{{0, 0, total}, {0, 7000, 7000}, {100, 5000, 5000}, {6000, 0, total - 6000}, {11990, 50, 11}} {
		got, err := log.Read(t.Context(), "long", c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.count {
			t.Errorf("Read(after %d, limit %d): %d events, want %d", c.after, c.limit, len(got), c.count)
			continue
		}
		for i, e := range got {
			if e.Seq != c.after+int64(i)+1 {
				t.Errorf("Read(after %d, limit %d): event %d has seq %d", c.after, c.limit, i, e.Seq)
				break
			}
		}
	}
}

// TestExecutionsInPages: a listing longer than one page (Limit 0, or a
// Limit above the page) comes back whole and in order, in either
// direction and for the unfinished ones alone, each page its own
// bounded statement: a log of hundreds of thousands of executions is
// listed without one statement outliving Config.OperationTimeout.
func TestExecutionsInPages(t *testing.T) {
	defer postgres.SetExecutionsPage(7)()
	pool := testPool(t)
	log := newLog(t, pool, randomSchema(t, pool))
	const total = 40
	var all, unfinished []string
	for i := range total {
		id := fmt.Sprintf("x%03d", i)
		evs := []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeExecutionStarted}}
		if i%3 == 0 {
			evs = append(evs, eventlog.Event{ExecutionID: id, Type: eventlog.TypeExecutionCompleted})
		} else {
			unfinished = append(unfinished, id)
		}
		if _, err := log.Append(t.Context(), evs); err != nil {
			t.Fatal(err)
		}
		all = append(all, id)
	}
	reversed := func(s []string) []string { s = slices.Clone(s); slices.Reverse(s); return s }
	for _, c := range []struct {
		q    eventlog.ExecutionsQuery
		want []string
	}{
		{eventlog.ExecutionsQuery{}, all},
		{eventlog.ExecutionsQuery{Limit: 20}, all[:20]},
		{eventlog.ExecutionsQuery{After: all[5], Limit: 16}, all[6:22]},
		{eventlog.ExecutionsQuery{NewestFirst: true}, reversed(all)},
		{eventlog.ExecutionsQuery{NewestFirst: true, After: all[30]}, reversed(all[:30])},
		{eventlog.ExecutionsQuery{Unfinished: true}, unfinished},
		{eventlog.ExecutionsQuery{Unfinished: true, NewestFirst: true, Limit: 15}, reversed(unfinished)[:15]},
	} {
		got, err := log.Executions(t.Context(), c.q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Executions(%+v) = %v, want %v", c.q, got, c.want)
		}
	}
}
