package natsjs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
)

// TestPlaybookCachesAreBounded: a long-lived worker and dispatcher that
// run many distinct playbooks (generated or edited sources, each a new
// hash) keep a bounded number of them, not every one they ever ran; a
// playbook that fell out of the worker's cache is fetched again and runs.
func TestPlaybookCachesAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second, 5*time.Second)
	w, _ := b.worker(t, "w-1", "", time.Second)
	src := func(i int) []byte {
		return []byte(header + fmt.Sprintf("# generated %d\nworkflow:\n  - step: start\n    tool: {kind: rec, key: 'k%d'}\n", i, i))
	}
	n := natsjs.MaxCachedPlaybooks + 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			id, err := b.eng.Start(ctx, src(i), engine.StartOptions{File: "gen.yaml"})
			if err != nil {
				return err
			}
			sum, err := b.eng.Wait(ctx, id)
			if err != nil {
				return err
			}
			if sum.Status != engine.StatusCompleted {
				return fmt.Errorf("playbook %d: %s %s", i, sum.Status, sum.Error)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := natsjs.CachedPlaybooks(w); got > natsjs.MaxCachedPlaybooks {
		t.Errorf("worker holds %d parsed playbooks after %d distinct ones, want at most %d", got, n, natsjs.MaxCachedPlaybooks)
	}
	if got := natsjs.StoredPlaybooks(b.disp); got > natsjs.MaxCachedPlaybooks {
		t.Errorf("dispatcher remembers %d playbook hashes after %d distinct ones, want at most %d", got, n, natsjs.MaxCachedPlaybooks)
	}
	// The least recently run ones were evicted: running one again stores
	// and fetches it again.
	b.run(t, string(src(0))[len(header):])
	if c := b.calls.count("k0"); c != 2 {
		t.Errorf("playbook 0 ran %d times, want 2", c)
	}
}
