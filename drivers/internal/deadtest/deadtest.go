// Package deadtest checks, through the engine, that rows a cursor driver
// dead-letters inside its own claim (cursor.Claim.Dead) are counted dead
// by the loop. The drivers' end-to-end tests drain a source whose body
// fails for some rows until the claim past max_attempts sets them aside:
// without Claim.Dead the loop would report them failed and never dead,
// while the source's dead letter holds them.
package deadtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strconv"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/drivertest"
)

// FailEvery serves the body of a drain playbook: GET <url>/<n> answers
// 500 when n is a multiple of every, 200 otherwise (400 for a path that
// is not a number, so that a playbook that renders the wrong field fails
// loudly). The server closes when the test ends.
func FailEvery(t testing.TB, every int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(path.Base(r.URL.Path))
		switch {
		case err != nil:
			http.Error(w, "want /<n>", http.StatusBadRequest)
		case n%every == 0:
			http.Error(w, "poison row", http.StatusInternalServerError)
		default:
			_, _ = w.Write([]byte(`{"ok": true}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Poison returns the keys of the rows numbered every, 2*every, ... (from
// 1) among keys: the rows whose body FailEvery fails.
func Poison(keys []string, every int) []string {
	var out []string
	for i := every; i <= len(keys); i += every {
		out = append(out, keys[i-1])
	}
	return out
}

// ExpectDead fails the test unless the drain r of keys ran every row but
// poison once, successfully, and every poison row maxAttempts times, each
// failed, and reported it dead once: the loop counts
// len(keys)-len(poison) rows ok, len(poison)*maxAttempts failed and
// len(poison) dead.
func ExpectDead(t testing.TB, r drivertest.Result, keys, poison []string, maxAttempts int) {
	t.Helper()
	items := drivertest.FrameItems(t, r.Events)
	if len(items) != len(keys) {
		t.Errorf("the engine reported %d distinct keys, want %d", len(items), len(keys))
	}
	want := make([]string, 0, maxAttempts+1)
	for range maxAttempts {
		want = append(want, engine.OutcomeError)
	}
	want = append(want, engine.OutcomeDead)
	for _, k := range keys {
		w := []string{engine.OutcomeOK}
		if slices.Contains(poison, k) {
			w = want
		}
		// In any order: the engine hands a failed row back before it
		// records the frame, so another slot's claim may bury the row and
		// record that first.
		if got := items[k]; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(w))) {
			t.Errorf("key %s: outcomes %v, want %v in any order", k, got, w)
		}
	}
	ok, failed, dead := len(keys)-len(poison), len(poison)*maxAttempts, len(poison)
	if ls := r.Loop; ls.Rows != ok+failed+dead || ls.OK != ok || ls.Failed != failed || ls.Dead != dead || !ls.Finished {
		t.Fatalf("loop status: %d rows, %d ok, %d failed, %d dead, finished %v; want %d rows: %d ok, %d failed, %d dead, finished",
			ls.Rows, ls.OK, ls.Failed, ls.Dead, ls.Finished, ok+failed+dead, ok, failed, dead)
	}
}

// ExpectDeadLetter fails the test unless the source's dead letter holds
// exactly the poison keys, in any order: the frame slots bury them
// concurrently.
func ExpectDeadLetter(t testing.TB, got, poison []string) {
	t.Helper()
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(poison))) {
		t.Fatalf("the dead letter holds %v, want %v", got, poison)
	}
}

// The drain of Drain: Rows rows, every Every-th failing, in a playbook
// whose frame has max_attempts MaxAttempts.
const (
	Rows        = 200
	Every       = 50
	MaxAttempts = 3
)

// Drain runs cfg, a playbook whose body GETs {{ workload.url }}/<n> for
// every row (n numbered from 1, as keys are ordered) with max_attempts
// MaxAttempts, against FailEvery(Every), then checks that deadLetter (the
// keys in the source's dead letter) holds the poison rows and that the
// loop counted them dead (ExpectDead).
func Drain(ctx context.Context, t *testing.T, cfg drivertest.DrainConfig, keys []string, deadLetter func() []string) {
	t.Helper()
	srv := FailEvery(t, Every)
	w := map[string]any{"url": srv.URL}
	for k, v := range cfg.Workload {
		w[k] = v
	}
	cfg.Workload = w
	// The dead letter is read once the workers settled their claims: a
	// source that buries in Claim.Commit does so after the frame.done that
	// reports the rows, which may end the execution.
	cfg.Shutdown = true
	r := drivertest.Drain(ctx, t, cfg)
	poison := Poison(keys, Every)
	ExpectDead(t, r, keys, poison, MaxAttempts)
	ExpectDeadLetter(t, deadLetter(), poison)
}

// ExpectClaimDead checks, on a cursor drv opens on spec (a fresh queue
// whose first two rows are keys[0] and keys[1], with spec.MaxAttempts
// set), that the claim which sets a row aside lists it in Claim.Dead:
// keys[0] is claimed and released MaxAttempts times, then a claim of two
// returns keys[1] with keys[0] dead; keys[1] is then released until a
// claim that returns no row lists it dead. deadAttempt is the
// Lease.Attempt a dead row carries, given the deliveries it ran;
// deadLetter returns the keys in the source's dead letter.
func ExpectClaimDead(t *testing.T, drv cursor.Driver, spec cursor.Spec, keys []string,
	deadAttempt func(ran int) int, deadLetter func() []string) {
	t.Helper()
	ctx := t.Context()
	maxAttempts := spec.MaxAttempts
	cur, err := drv.Open(ctx, spec)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = cur.Close() })
	release := func(rows []cursor.Row) {
		t.Helper()
		if err := cur.Release(ctx, rows); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		c := commit(t, cur, 1)
		if len(c.Rows) != 1 || c.Rows[0].Key != keys[0] || c.Rows[0].Lease.Attempt != attempt || len(c.Dead) != 0 {
			t.Fatalf("claim %d: rows %+v, dead %+v; want %s at attempt %d, none dead", attempt, c.Rows, c.Dead, keys[0], attempt)
		}
		release(c.Rows)
	}
	c := commit(t, cur, 2)
	if len(c.Rows) != 1 || c.Rows[0].Key != keys[1] {
		t.Fatalf("claim past max_attempts: rows %+v, want %s", c.Rows, keys[1])
	}
	if len(c.Dead) != 1 || c.Dead[0].Key != keys[0] || len(c.Dead[0].Values) == 0 ||
		c.Dead[0].Lease.Attempt != deadAttempt(maxAttempts) || c.Dead[0].Lease.Token != "" {
		t.Fatalf("claim past max_attempts: dead %+v, want %s with values, attempt %d and no token", c.Dead, keys[0], deadAttempt(maxAttempts))
	}
	ExpectDeadLetter(t, deadLetter(), keys[:1])
	// A claim that finds nothing else to run still reports what it buried.
	for range maxAttempts - 1 {
		release(c.Rows)
		c = commit(t, cur, 1)
	}
	release(c.Rows)
	c = commit(t, cur, 1)
	if len(c.Rows) != 0 || len(c.Dead) != 1 || c.Dead[0].Key != keys[1] {
		t.Fatalf("drained claim: rows %+v, dead %+v; want none and %s dead", c.Rows, c.Dead, keys[1])
	}
	if c = commit(t, cur, 1); len(c.Rows) != 0 || len(c.Dead) != 0 {
		t.Fatalf("claim after the dead letter: rows %+v, dead %+v; want neither", c.Rows, c.Dead)
	}
}

// commit claims up to max rows and commits the claim.
func commit(t *testing.T, cur cursor.Cursor, max int) *cursor.Claim {
	t.Helper()
	c, err := cur.Claim(t.Context(), max)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if err := c.Commit(t.Context()); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return c
}
