package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/faultlog"
	"github.com/cursorflow/cursorflow/internal/apitest"
)

// hurriedRunner is a host's Runner that gives every start a deadline of
// its own.
type hurriedRunner struct {
	api.Runner
	d time.Duration
}

func (h hurriedRunner) Start(ctx context.Context, src []byte, opts engine.StartOptions) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, h.d)
	defer cancel()
	return h.Runner.Start(ctx, src, opts)
}

// TestStartNotConfirmedNamesTheExecution: the engine takes a start, but
// its record is slow (the log's append waits here) and the start's
// deadline ends first. The execution runs all the same once the log
// answers, so the 503 must name it: the API answered only "engine did not
// answer in time", and a client that started the work again ran it twice.
func TestStartNotConfirmedNamesTheExecution(t *testing.T) {
	gate := make(chan struct{})
	srv := apitest.Start(t, apitest.Config{Token: testToken, Logger: testLogger(t),
		Engine: func(c *engine.Config) {
			fl := faultlog.New(c.Log)
			fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Match: faultlog.AppendsInOrder(eventlog.TypeExecutionStarted), Times: 1, Gate: gate})
			c.Log = fl
		},
		Configure: func(c *api.Config) { c.Engine = hurriedRunner{Runner: c.Engine, d: 200 * time.Millisecond} },
	})
	b := &bundle{srv}
	r := b.do(t, http.MethodPost, "/v1/executions", api.StartRequest{Source: echoPlaybook})
	want(t, r, http.StatusServiceUnavailable)
	body := r.errorBody(t)
	if body.ExecutionID == "" || !strings.Contains(body.Error, body.ExecutionID) || r.header.Get("Location") != "/v1/executions/"+body.ExecutionID {
		t.Fatalf("503 %s (Location %q): want the execution named", r.body, r.header.Get("Location"))
	}
	close(gate)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sum, err := srv.Engine.Wait(ctx, body.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("the execution the 503 named: %+v, want completed", sum)
	}
	want(t, b.do(t, http.MethodGet, "/v1/executions/"+body.ExecutionID, nil), http.StatusOK)
}
