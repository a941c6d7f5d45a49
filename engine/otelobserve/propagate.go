package otelobserve

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/cursorflow/cursorflow/engine"
)

// propagator is the W3C Trace Context propagator Inject and Extract use
// (traceparent and tracestate keys).
var propagator = propagation.TraceContext{}

// Inject writes ctx's span context into meta as W3C "traceparent" (and
// "tracestate") entries and returns meta, allocated when nil. A ctx
// without a valid span context leaves meta as it is.
func Inject(ctx context.Context, meta map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = map[string]string{}
	}
	propagator.Inject(ctx, propagation.MapCarrier(meta))
	return meta
}

// Extract returns ctx carrying the remote span context found in meta (as
// written by Inject), for a worker to parent its own spans on. Without a
// traceparent it returns ctx unchanged.
func Extract(ctx context.Context, meta map[string]string) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier(meta))
}

// ContextFor returns ctx carrying the span of the command's current
// attempt (or, failing that, of its execution) while the observer holds
// it open; ctx unchanged otherwise.
func (o *Observer) ContextFor(ctx context.Context, executionID, commandID string) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.get(cmdKey(executionID, commandID))
	if s == nil {
		s = o.get(execKey(executionID))
	}
	if s == nil {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, s.span.SpanContext())
}

// InjectCommand writes the command span's trace context into cmd.Meta.
// The engine observes command.issued before it dispatches the command, so
// a transport can call this from Dispatch.
func (o *Observer) InjectCommand(cmd *engine.Command) {
	if cmd == nil {
		return
	}
	cmd.Meta = Inject(o.ContextFor(context.Background(), cmd.ExecutionID, cmd.ID), cmd.Meta)
}

// WrapDispatcher returns a Dispatcher that injects each command's trace
// context (InjectCommand) before handing it to next.
func (o *Observer) WrapDispatcher(next engine.Dispatcher) engine.Dispatcher {
	return tracingDispatcher{o: o, next: next}
}

type tracingDispatcher struct {
	o    *Observer
	next engine.Dispatcher
}

func (d tracingDispatcher) Dispatch(cmd *engine.Command) {
	d.o.InjectCommand(cmd)
	d.next.Dispatch(cmd)
}

func (d tracingDispatcher) Durable() bool { return d.next.Durable() }

func (d tracingDispatcher) Cancel(executionID string) { d.next.Cancel(executionID) }
