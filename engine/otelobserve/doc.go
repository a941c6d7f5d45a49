// Package otelobserve derives OpenTelemetry traces and metrics from an
// engine's events.
//
// The engine's Observer hook sees every event once it is durably
// appended; New returns an Observer that turns them into
//
//   - traces: one span per execution, with a span per step run beneath it,
//     a span per command (each attempt) beneath its step, and for cursor
//     frames a span from the claim to frame.done beneath the command. Events
//     arrive after the fact, so every span carries the events' own times
//     (trace.WithTimestamp), not the observer's clock.
//   - metrics: rows by outcome (items/s is its rate), frames, claim latency
//     (frame.claimed minus command.issued), how long each claim stayed open
//     in its source until its rows were on record (frame.done's
//     claim_open_us), lease expiries, retries, dead
//     letters, commands and their durations, executions by outcome and
//     events by type (the event amplification the design tracks).
//
// Setup builds the providers a server needs from two settings: an OTLP/HTTP
// endpoint and a Prometheus /metrics handler.
//
// Commands crossing a process boundary can carry the command span's W3C
// trace context in Command.Meta: see Inject, Extract, Observer.InjectCommand
// and Observer.WrapDispatcher.
package otelobserve
