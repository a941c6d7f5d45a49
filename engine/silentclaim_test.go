package engine_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// TestSilentSourceClaimIsCut: the source database stops answering with
// the connection still open (a frozen server, a path a firewall or a
// failover black-holed) while a slot claims. The claim is cut once it
// has gone a frame lease without an answer, said so, and tried again;
// once the source answers again the drain completes with every row done.
// The claim waited, and the loop with it, for as long as the connection
// looked alive, without a word.
func TestSilentSourceClaimIsCut(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresSchema(t)
	_, table := pgQueue(t, dsn, 20)
	proxy, viaProxy := testenv.NewURLProxy(t, dsn)
	kc := tools.StaticURLs(map[string]string{"pg": viaProxy})
	treg, creg, closer := stdwire.Registries(kc, nil, false)
	t.Cleanup(func() { _ = closer.Close() })
	entered, release := registerGate(treg)
	// Both claims meet the silence: the one made ahead as the first frame
	// ends ("a claim made ahead was cut"), then the next frame's own,
	// cut and tried again; the test waits for the latter.
	aheadCut, cut := make(chan struct{}), make(chan struct{})
	logger := slog.New(signalHandler{
		signalHandler{slog.NewTextHandler(t.Output(), nil), "a claim made ahead was cut", &sync.Once{}, aheadCut},
		"cursor: transient failure; trying again", &sync.Once{}, cut})
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Tick: 10 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The claim marks its rows done: nothing but claims talks to the
	// source.
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          UPDATE `+table+` SET status = 'done', done_count = done_count + 1
          WHERE id IN (SELECT id FROM `+table+` WHERE status = 'pending' ORDER BY id
                       LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED)
          RETURNING id
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 1
        frame: {max_rows: 5, row_concurrency: 1, lease_seconds: 2}
    tool: {kind: gate}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first row never ran")
	}
	proxy.Hole()
	release()
	select {
	case <-cut:
		select {
		case <-aheadCut:
		default:
			t.Fatal("the next frame's claim was cut before the claim made ahead")
		}
	case <-ctx.Done():
		t.Fatal("a claim through the silent connection was never cut")
	}
	proxy.Resume()
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("%v %+v", err, sum)
	}
	var done, left int
	testenv.QueryRow(t, dsn, "SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status <> 'done') FROM "+table, &done, &left)
	if done != 20 || left != 0 {
		t.Fatalf("%d of 20 rows done, %d not", done, left)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	if ls := st.Loops["start#1"]; ls.Failed != 0 || ls.Done < 20 {
		t.Fatalf("loop %+v: want every row done, none failed", ls)
	}
}
