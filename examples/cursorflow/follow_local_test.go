package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// flakyLog is a log whose Read and Wait fail, as a dropped connection
// makes them, while down is set.
type flakyLog struct {
	eventlog.Log
	down   atomic.Bool
	failed atomic.Int64
	onFail func()
}

var errDropped = errors.New("FATAL: terminating connection due to administrator command")

func (l *flakyLog) Read(ctx context.Context, id string, after int64, limit int) ([]eventlog.Event, error) {
	if l.down.Load() {
		l.fail()
		return nil, errDropped
	}
	return l.Log.Read(ctx, id, after, limit)
}

func (l *flakyLog) Wait(ctx context.Context, id string, after int64) error {
	if l.down.Load() {
		l.fail()
		return errDropped
	}
	return l.Log.Wait(ctx, id, after)
}

func (l *flakyLog) fail() {
	if l.failed.Add(1) == 3 && l.onFail != nil {
		l.onFail()
	}
}

// TestFollowRidesOutTheEventLog: events --follow --eventlog goes on
// through a log that fails for a while (its connections dropped) and
// prints the execution to its end. Before, the first failed wait ended
// the follow with exit 1 while the execution went on.
func TestFollowRidesOutTheEventLog(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := eventlog.NewMemory()
	const id = "exec-1"
	if _, err := mem.Append(ctx, []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeExecutionStarted, Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	log := &flakyLog{Log: mem}
	log.down.Store(true)
	// The log answers again after three failures, and the execution ends.
	log.onFail = func() {
		log.down.Store(false)
		if _, err := mem.Append(context.Background(), []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeExecutionCompleted, Payload: []byte(`{}`)}}); err != nil {
			t.Error(err)
		}
	}
	var out, errOut bytes.Buffer
	var types []string
	code := printLocalEvents(ctx, log, id, 0, true, "test log", func(ev eventlog.Event) { types = append(types, ev.Type) }, &errOut)
	out.WriteString(strings.Join(types, " "))
	if code != exitOK || out.String() != "execution.started execution.completed" {
		t.Fatalf("exit %d, printed %q, stderr %s: want both events, exit 0", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "trying again until the event log answers") || !strings.Contains(errOut.String(), "answers again") {
		t.Fatalf("stderr %q: want the outage and the recovery said", errOut.String())
	}
}

// TestEventsWithoutFollowFailOnTheEventLog: without --follow a failed read
// is an error at once (exit 1), not waited out.
func TestEventsWithoutFollowFailOnTheEventLog(t *testing.T) {
	t.Parallel()
	log := &flakyLog{Log: eventlog.NewMemory()}
	log.down.Store(true)
	var errOut bytes.Buffer
	code := printLocalEvents(context.Background(), log, "exec-1", 0, false, "test log", func(eventlog.Event) {}, &errOut)
	if code != exitInvalid || !strings.Contains(errOut.String(), errDropped.Error()) {
		t.Fatalf("exit %d, stderr %q: want exit 1 naming the failure", code, errOut.String())
	}
}
