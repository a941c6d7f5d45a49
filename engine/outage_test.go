package engine_test

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// signalHandler is a slog handler that closes seen the first time a
// record's message, or one of its attributes, contains match.
type signalHandler struct {
	slog.Handler
	match string
	once  *sync.Once
	seen  chan struct{}
}

// Enabled is true from Info up whatever the wrapped handler says, so a
// discarding handler can be wrapped and still signal.
func (h signalHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h signalHandler) Handle(ctx context.Context, r slog.Record) error {
	hit := strings.Contains(r.Message, h.match)
	r.Attrs(func(a slog.Attr) bool {
		hit = hit || strings.Contains(a.Value.String(), h.match)
		return !hit
	})
	if hit {
		h.once.Do(func() { close(h.seen) })
	}
	return h.Handler.Handle(ctx, r)
}

// registerGate registers a tool "gate" whose calls block until release is
// called (or their context ends); entered closes when the first call
// begins.
func registerGate(reg *tools.Registry) (entered <-chan struct{}, release func()) {
	in, open := make(chan struct{}), make(chan struct{})
	var first, opened sync.Once
	reg.MustRegister("gate", tools.ToolFunc(func(ctx context.Context, _ *tools.Call) (tools.Output, error) {
		first.Do(func() { close(in) })
		select {
		case <-open:
		case <-ctx.Done():
			return tools.Output{}, ctx.Err()
		}
		return tools.Output{Status: "ok"}, nil
	}))
	return in, func() { opened.Do(func() { close(open) }) }
}

func (h signalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return signalHandler{h.Handler.WithAttrs(as), h.match, h.once, h.seen}
}

func (h signalHandler) WithGroup(g string) slog.Handler {
	return signalHandler{h.Handler.WithGroup(g), h.match, h.once, h.seen}
}

// TestSourceOutageIsRiddenOut: the source database stops accepting
// connections and drops the ones it had while a frame runs (a restart, a
// failover). The frame's ack, and the claims after it, fail with
// connection errors that may pass: they are tried again, and once the
// database is back the drain completes with every row done once and none
// failed, instead of failing the execution with rows left claimed.
func TestSourceOutageIsRiddenOut(t *testing.T) {
	t.Parallel()
	admin := testenv.Postgres(t)
	dsn := testenv.PostgresDatabase(t, "outage")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	_, table := pgQueue(t, dsn, 30)
	kc := tools.StaticURLs(map[string]string{"pg": dsn})
	treg, creg, closer := stdwire.Registries(kc, nil, false)
	t.Cleanup(func() { _ = closer.Close() })
	entered, release := registerGate(treg)
	retrying := make(chan struct{})
	logger := slog.New(signalHandler{slog.NewTextHandler(t.Output(), nil), "transient failure; trying again", &sync.Once{}, retrying})
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Tick: 10 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          UPDATE `+table+` SET status = 'claimed', attempts = attempts + 1
          WHERE id IN (SELECT id FROM `+table+` WHERE status = 'pending' ORDER BY id
                       LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED)
          RETURNING id
        ack: UPDATE `+table+` SET status = 'done', done_count = done_count + 1 WHERE id IN ({{ keys | join(',') }})
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 1
        frame: {max_rows: 10, row_concurrency: 1}
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
	// The outage: no new connections, and the open ones dropped.
	testenv.Exec(t, admin, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false")
	testenv.Exec(t, admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"+name+"'")
	release()
	select {
	case <-retrying:
	case <-ctx.Done():
		t.Fatal("the frame never retried its ack")
	}
	testenv.Exec(t, admin, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS true")
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("%v %+v", err, sum)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	if ls := st.Loops["start#1"]; ls.Failed != 0 || ls.Done != 30 {
		t.Fatalf("loop %+v: want 30 rows done, none failed", ls)
	}
	var done, twice int
	testenv.QueryRow(t, dsn, "SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE done_count > 1) FROM "+table, &done, &twice)
	if done != 30 || twice != 0 {
		t.Fatalf("%d of 30 rows done, %d acked twice", done, twice)
	}
}
