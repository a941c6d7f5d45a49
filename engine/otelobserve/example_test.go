package otelobserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cursorflow/cursorflow/engine/otelobserve"
	"github.com/cursorflow/cursorflow/eventlog"
)

// Events become spans timed by the events themselves.
func Example() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs := otelobserve.New(otelobserve.Config{TracerProvider: tp})
	// Pass obs as engine.Config.Observer; here we feed it a history.
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for i, ev := range []eventlog.Event{
		{Type: eventlog.TypeExecutionStarted, Payload: raw(`{"playbook": "metadata: {name: demo}"}`)},
		{Type: eventlog.TypeCommandIssued, Step: "start", CommandID: "c@1", Attempt: 1, Payload: raw(`{"kind": "step", "run": "start#1", "base": "c"}`)},
		{Type: eventlog.TypeCommandCompleted, Step: "start", CommandID: "c@1", Attempt: 1},
		{Type: eventlog.TypeStepCompleted, Step: "start", Payload: raw(`{"run": "start#1"}`)},
		{Type: eventlog.TypeExecutionCompleted},
	} {
		ev.ExecutionID, ev.Seq, ev.Time = "x1", int64(i+1), t0.Add(time.Duration(i)*time.Second)
		obs.Observe(ev)
	}
	for _, s := range rec.Ended() {
		fmt.Printf("%-14s %s\n", s.Name(), s.EndTime().Sub(s.StartTime()))
	}
	_ = tp.Shutdown(context.Background())
	// Output:
	// command start  1s
	// step start     2s
	// execution demo 4s
}

// A transport carries the command span's context in Command.Meta; the
// worker side extracts it.
func ExampleInject() {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("demo").Start(context.Background(), "dispatch")
	meta := otelobserve.Inject(ctx, nil)
	span.End()
	remote := otelobserve.Extract(context.Background(), meta)
	fmt.Println(len(meta["traceparent"]), remote != context.Background())
	// Output: 55 true
}
