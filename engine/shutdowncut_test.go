package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// cutTool blocks, until its context ends, the calls made while block is
// set (the first engine's), and fails them with the context's error as a
// well-behaved tool does; with block unset it succeeds.
type cutTool struct {
	block   atomic.Bool
	started chan struct{}
	once    atomic.Bool
	ran     atomic.Int32
}

func (c *cutTool) Execute(ctx context.Context, _ *tools.Call) (tools.Output, error) {
	if c.block.Load() {
		if c.once.CompareAndSwap(false, true) {
			close(c.started)
		}
		<-ctx.Done()
		return tools.Output{}, ctx.Err()
	}
	c.ran.Add(1)
	return tools.Output{Status: "ok"}, nil
}

// TestShutdownCutIsNotAFailure: rows and steps that a Shutdown's deadline
// cuts short are not recorded as failed (a resume would never run them
// again, and a source without release would keep the rows claimed for
// good). A frame whose source cannot take its rows back is left
// unreported, as a killed worker leaves it, and the resume runs its rows;
// one whose source can hands them back. Either way the resumed execution
// completes with every row done and none failed.
func TestShutdownCutIsNotAFailure(t *testing.T) {
	t.Parallel()
	step := header + `
workflow:
  - step: start
    tool: {kind: cut}
`
	for _, tc := range []struct {
		name, src string
		rows      bool
	}{
		{"frame without release", jobsPlaybook([]string{jobsAck}, 1, `{max_rows: 5, row_concurrency: 2, process: row}`, `{kind: cut}`), true},
		{"frame with release", jobsPlaybook([]string{jobsAck, jobsRelease}, 1, `{max_rows: 5, row_concurrency: 2, process: row}`, `{kind: cut}`), true},
		{"frame chain", jobsPlaybook([]string{jobsAck}, 1, `{max_rows: 5, process: frame}`, `{kind: cut}`), true},
		{"step", step, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, path := jobsQueue(t, 5)
			cut := &cutTool{started: make(chan struct{})}
			cut.block.Store(true)
			reg := tools.NewRegistry()
			reg.MustRegister("cut", cut)
			cursors := cursor.NewRegistry()
			_ = cursors.Register("sqlite", sqlitedriver.New(sqlitedriver.Config{}))
			t.Cleanup(func() { _ = cursors.Close() })
			log := eventlog.NewMemory()
			cfg := engine.Config{Log: log, Tools: reg, Cursors: cursors, Tick: 5 * time.Millisecond,
				Keychain: tools.StaticURLs(map[string]string{"q": path})}
			first, err := engine.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			id, err := first.Start(ctx, []byte(tc.src), engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-cut.started:
			case <-ctx.Done():
				t.Fatal("the tool never started")
			}
			expired, stop := context.WithCancel(ctx)
			stop()
			_ = first.Shutdown(expired)

			evs, err := log.Read(ctx, id, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				switch ev.Type {
				case eventlog.TypeCommandFailed, eventlog.TypeExecutionFailed:
					t.Fatalf("the shutdown's cut was recorded as a failure: %s %s", ev.Type, ev.Payload)
				case eventlog.TypeFrameDone:
					var p struct {
						Items []struct{ Outcome string } `json:"items"`
					}
					if err := json.Unmarshal(ev.Payload, &p); err != nil {
						t.Fatal(err)
					}
					for _, it := range p.Items {
						if it.Outcome != engine.OutcomeOK {
							t.Fatalf("the shutdown's cut was recorded as a row outcome: %s", ev.Payload)
						}
					}
				}
			}

			cut.block.Store(false)
			second, err := engine.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = second.Close() })
			if err := second.Resume(ctx, id); err != nil {
				t.Fatal(err)
			}
			sum, err := second.Wait(ctx, id)
			if err != nil || sum.Status != engine.StatusCompleted {
				t.Fatalf("resumed execution: %v %+v", err, sum)
			}
			if !tc.rows {
				if cut.ran.Load() != 1 {
					t.Fatalf("the step ran %d times after the resume, want 1", cut.ran.Load())
				}
				return
			}
			var done int
			if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE status = 'done'`).Scan(&done); err != nil {
				t.Fatal(err)
			}
			st, err := engine.Inspect(ctx, log, id)
			if err != nil {
				t.Fatal(err)
			}
			ls, ok := st.Loops["start#1"]
			if done != 5 || !ok || ls.Failed != 0 || ls.Done != 5 {
				t.Fatalf("%d of 5 jobs done; loops %s", done, fmt.Sprint(st.Loops))
			}
		})
	}
}

// TestInvalidExecutionID: an id a host chooses that cannot name an
// execution is refused as such, not as the log being unavailable (which
// invites a retry that can never succeed).
func TestInvalidExecutionID(t *testing.T) {
	t.Parallel()
	e := setup(t, nil).eng
	for _, id := range []string{"bad\x00id", " padded", "line\nbreak", strings.Repeat("x", engine.MaxExecutionIDLen+1), "\xff"} {
		_, err := e.Start(context.Background(), []byte(twoSteps), engine.StartOptions{ExecutionID: id})
		if !errors.Is(err, engine.ErrInvalidExecutionID) || errors.Is(err, engine.ErrUnavailable) {
			t.Errorf("ExecutionID %q: %v, want ErrInvalidExecutionID", id, err)
		}
	}
	if _, err := e.Start(context.Background(), []byte(twoSteps), engine.StartOptions{ExecutionID: "order-42/attempt-1"}); err != nil {
		t.Fatalf("a plain id: %v", err)
	}
}

// TestNilArguments: the package's functions answer a nil playbook or log
// with an error or a finding, not a nil dereference.
func TestNilArguments(t *testing.T) {
	t.Parallel()
	e := setup(t, nil).eng
	if probs := e.Check(nil); len(probs) != 1 {
		t.Errorf("Check(nil) = %v", probs)
	}
	if probs := engine.CheckCredentials(context.Background(), nil, nil, nil); len(probs) != 1 {
		t.Errorf("CheckCredentials(nil) = %v", probs)
	}
	if probs := engine.Lint(nil, nil); len(probs) != 0 {
		t.Errorf("Lint(nil) = %v", probs)
	}
	if _, err := engine.Inspect(context.Background(), nil, "x"); err == nil {
		t.Error("Inspect with a nil log: no error")
	}
}

// TestLogClosedUnderTheEngine: a Start on an engine whose log the host
// closed fails with the log's ErrClosed, not ErrUnavailable's invitation
// to send it again, which can never succeed.
func TestLogClosedUnderTheEngine(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_ = b.log.Close()
	_, err := b.eng.Start(context.Background(), []byte(twoSteps), engine.StartOptions{})
	if !errors.Is(err, eventlog.ErrClosed) || errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("Start on a closed log: %v, want eventlog.ErrClosed and not ErrUnavailable", err)
	}
}
