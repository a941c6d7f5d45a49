// Package deadtest checks, through the engine, that rows a cursor driver
// dead-letters inside its own claim (cursor.Claim.Dead) are counted dead
// by the loop. The drivers' end-to-end tests drain a source whose body
// fails for some rows until the claim past max_attempts sets them aside:
// without Claim.Dead the loop would report them failed and never dead,
// while the source's dead letter holds them.
package deadtest

import (
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strconv"
	"testing"

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
// failed, and then reported it dead once: the loop counts
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
		if got := items[k]; !slices.Equal(got, w) {
			t.Errorf("key %s: outcomes %v, want %v", k, got, w)
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
