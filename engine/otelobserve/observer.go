package otelobserve

import (
	"container/list"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.yaml.in/yaml/v3"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/cursorflow/cursorflow/engine"

// DefaultMaxOpenSpans bounds the spans an Observer keeps open.
const DefaultMaxOpenSpans = 10000

// Attribute keys on spans and metrics.
const (
	AttrExecutionID = attribute.Key("cursorflow.execution_id")
	AttrPlaybook    = attribute.Key("cursorflow.playbook")
	AttrStep        = attribute.Key("cursorflow.step")
	AttrRun         = attribute.Key("cursorflow.run")
	AttrCommandID   = attribute.Key("cursorflow.command_id")
	AttrKind        = attribute.Key("cursorflow.command.kind")
	AttrAttempt     = attribute.Key("cursorflow.attempt")
	AttrReason      = attribute.Key("cursorflow.reason")
	AttrLoopID      = attribute.Key("cursorflow.loop_id")
	AttrLoopMode    = attribute.Key("cursorflow.loop.mode")
	AttrFrame       = attribute.Key("cursorflow.frame")
	AttrSlot        = attribute.Key("cursorflow.slot")
	AttrWorkerID    = attribute.Key("cursorflow.worker_id")
	AttrRows        = attribute.Key("cursorflow.rows")
	AttrOutcome     = attribute.Key("cursorflow.outcome")
	AttrStatus      = attribute.Key("cursorflow.status")
	AttrEventType   = attribute.Key("cursorflow.event.type")
	AttrDrained     = attribute.Key("cursorflow.drained")
	AttrResumed     = attribute.Key("cursorflow.resumed")
	AttrEvicted     = attribute.Key("cursorflow.evicted")
	AttrParentExec  = attribute.Key("cursorflow.parent_execution_id")
)

// Config configures New and Setup.
type Config struct {
	// TracerProvider creates the spans. Defaults to otel's global
	// provider. Setup sets it.
	TracerProvider trace.TracerProvider
	// MeterProvider creates the instruments. Defaults to otel's global
	// provider. Setup sets it.
	MeterProvider metric.MeterProvider
	// MaxOpenSpans bounds the spans kept open while their closing event is
	// awaited; past it the oldest is ended early, marked
	// cursorflow.evicted. Defaults to DefaultMaxOpenSpans.
	MaxOpenSpans int
	// Logger receives the observer's own problems. Defaults to
	// slog.Default().
	Logger *slog.Logger

	// OTLPEndpoint (Setup only) is an OTLP/HTTP collector's base URL, such
	// as http://collector:4318; traces go to /v1/traces and metrics to
	// /v1/metrics under it. Empty exports nothing over OTLP.
	OTLPEndpoint string
	// Prometheus (Setup only) makes Setup return a /metrics handler in the
	// Prometheus text format.
	Prometheus bool
	// ServiceName (Setup only) is the resource's service.name. Defaults to
	// "cursorflow".
	ServiceName string
	// MetricInterval (Setup only) is how often metrics are pushed over
	// OTLP. Defaults to 30 seconds.
	MetricInterval time.Duration
}

// Observer is an engine.Observer that derives traces and metrics from
// events. It is safe for concurrent use (several engines may share one).
type Observer struct {
	tracer trace.Tracer
	log    *slog.Logger
	max    int
	inst   instruments

	mu    sync.Mutex
	open  map[string]*list.Element // key → *openSpan
	order *list.List               // open spans, oldest first
	execs map[string]map[string]struct{}
	// last is the latest event time seen: evicted spans end there.
	last time.Time
}

var _ engine.Observer = (*Observer)(nil)

type openSpan struct {
	key    string
	exec   string
	span   trace.Span
	ctx    context.Context
	start  time.Time
	step   string
	kind   string
	parent string // key of the parent span
}

type instruments struct {
	events        metric.Int64Counter
	rows          metric.Int64Counter
	frames        metric.Int64Counter
	claimLatency  metric.Float64Histogram
	claimOpen     metric.Float64Histogram
	leaseExpiries metric.Int64Counter
	retries       metric.Int64Counter
	deadLetters   metric.Int64Counter
	commands      metric.Int64Counter
	cmdDuration   metric.Float64Histogram
	executions    metric.Int64Counter
}

// New returns an Observer reporting to cfg's providers. Pass it as
// engine.Config.Observer.
func New(cfg Config) *Observer {
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	if cfg.MaxOpenSpans <= 0 {
		cfg.MaxOpenSpans = DefaultMaxOpenSpans
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	o := &Observer{
		tracer: cfg.TracerProvider.Tracer(ScopeName),
		log:    cfg.Logger,
		max:    cfg.MaxOpenSpans,
		open:   map[string]*list.Element{},
		order:  list.New(),
		execs:  map[string]map[string]struct{}{},
	}
	o.inst = newInstruments(cfg.MeterProvider.Meter(ScopeName), cfg.Logger)
	return o
}

func newInstruments(m metric.Meter, log *slog.Logger) instruments {
	// The API hands back a working no-op instrument along with an error,
	// so a failed registration costs that metric, never the observer.
	check := func(name string, err error) {
		if err != nil {
			log.Warn("otelobserve: instrument", "name", name, "error", err)
		}
	}
	var in instruments
	var err error
	secs := metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
	in.events, err = m.Int64Counter("cursorflow.events", metric.WithUnit("{event}"), metric.WithDescription("Events appended to the log, by type."))
	check("cursorflow.events", err)
	in.rows, err = m.Int64Counter("cursorflow.rows", metric.WithUnit("{row}"), metric.WithDescription("Cursor rows processed, by step and outcome (ok, error, dead); its rate is items/s."))
	check("cursorflow.rows", err)
	in.frames, err = m.Int64Counter("cursorflow.frames", metric.WithUnit("{frame}"), metric.WithDescription("Cursor frames finished, by step and whether the claim found the source drained."))
	check("cursorflow.frames", err)
	in.claimLatency, err = m.Float64Histogram("cursorflow.frame.claim.latency", metric.WithUnit("s"), secs, metric.WithDescription("Time from a frame command's issue to its rows being claimed."))
	check("cursorflow.frame.claim.latency", err)
	// A claim's window is an append and a round trip or two: milliseconds.
	windows := metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 5, 30)
	in.claimOpen, err = m.Float64Histogram("cursorflow.frame.claim.open", metric.WithUnit("s"), windows,
		metric.WithDescription("Time a frame's claim stayed uncommitted in its source, from the claim returning rows to its commit once they were on record: "+
			"the event log's latency on the frame's path, which the source's server pays for while the claim is open."))
	check("cursorflow.frame.claim.open", err)
	in.leaseExpiries, err = m.Int64Counter("cursorflow.lease.expiries", metric.WithUnit("{command}"), metric.WithDescription("Commands re-issued because their lease expired."))
	check("cursorflow.lease.expiries", err)
	in.retries, err = m.Int64Counter("cursorflow.retries", metric.WithUnit("{retry}"), metric.WithDescription("Retries scheduled by policies."))
	check("cursorflow.retries", err)
	in.deadLetters, err = m.Int64Counter("cursorflow.dead_letters", metric.WithUnit("{row}"), metric.WithDescription("Cursor rows dead-lettered."))
	check("cursorflow.dead_letters", err)
	in.commands, err = m.Int64Counter("cursorflow.commands", metric.WithUnit("{command}"), metric.WithDescription("Commands finished, by kind and outcome."))
	check("cursorflow.commands", err)
	in.cmdDuration, err = m.Float64Histogram("cursorflow.command.duration", metric.WithUnit("s"), secs, metric.WithDescription("Time from a command's issue to its report."))
	check("cursorflow.command.duration", err)
	in.executions, err = m.Int64Counter("cursorflow.executions", metric.WithUnit("{execution}"), metric.WithDescription("Executions finished, by status."))
	check("cursorflow.executions", err)
	return in
}

// Span keys: one namespace per level.
func execKey(exec string) string         { return "x\x00" + exec }
func stepKey(exec, run string) string    { return "s\x00" + exec + "\x00" + run }
func cmdKey(exec, cmdID string) string   { return "c\x00" + exec + "\x00" + cmdID }
func frameKey(exec, cmdID string) string { return "f\x00" + exec + "\x00" + cmdID }

// Payload shapes, the subset the observer reads.
type (
	startedPayload struct {
		Playbook string `json:"playbook"`
		Parent   string `json:"parent"`
	}
	issuedPayload struct {
		Kind   string `json:"kind"`
		Run    string `json:"run"`
		Base   string `json:"base"`
		Slot   int    `json:"slot"`
		Reason string `json:"reason"`
	}
	runPayload struct {
		Run   string `json:"run"`
		Mode  string `json:"mode"`
		Error string `json:"error"`
	}
	claimedPayload struct {
		Rows []json.RawMessage `json:"rows"`
	}
	frameDonePayload struct {
		Drained     bool                 `json:"drained"`
		Items       []engine.ItemOutcome `json:"items"`
		Fail        string               `json:"fail"`
		ClaimOpenUs int64                `json:"claim_open_us"`
	}
	completedPayload struct {
		Error string          `json:"error"`
		Retry json.RawMessage `json:"retry"`
	}
	finishedPayload struct {
		Step    string `json:"step"`
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
)

// Observe implements engine.Observer. It never blocks on I/O: spans go to
// the provider's processors and measurements to its readers.
func (o *Observer) Observe(ev eventlog.Event) {
	ctx := context.Background()
	o.inst.events.Add(ctx, 1, metric.WithAttributes(AttrEventType.String(ev.Type)))
	o.mu.Lock()
	defer o.mu.Unlock()
	if ev.Time.After(o.last) {
		o.last = ev.Time
	}
	ts := ev.Time
	if ts.IsZero() {
		ts = time.Now()
	}
	stepAttr := metric.WithAttributes(AttrStep.String(ev.Step))
	switch ev.Type {
	case eventlog.TypeExecutionStarted:
		var p startedPayload
		o.decode(ev, &p)
		o.startExecution(ev, ts, p, false)
	case eventlog.TypeExecutionCompleted, eventlog.TypeExecutionFailed, eventlog.TypeExecutionCancelled:
		var p finishedPayload
		o.decode(ev, &p)
		status := strings.TrimPrefix(ev.Type, "execution.")
		o.inst.executions.Add(ctx, 1, metric.WithAttributes(AttrStatus.String(status)))
		o.finishExecution(ev, ts, status, p)
	case eventlog.TypeCancelRequested:
		if x := o.get(execKey(ev.ExecutionID)); x != nil {
			x.span.AddEvent("cancel requested", trace.WithTimestamp(ts))
		}
	case eventlog.TypeLoopStarted:
		var p runPayload
		o.decode(ev, &p)
		s := o.ensureStep(ev, ts, p.Run)
		s.span.SetAttributes(AttrLoopMode.String(p.Mode), AttrLoopID.String(ev.LoopID))
	case eventlog.TypeCommandIssued:
		var p issuedPayload
		o.decode(ev, &p)
		o.issue(ctx, ev, ts, p)
	case eventlog.TypeFrameClaimed:
		var p claimedPayload
		o.decode(ev, &p)
		c := o.get(cmdKey(ev.ExecutionID, ev.CommandID))
		if c == nil {
			return
		}
		o.inst.claimLatency.Record(ctx, ts.Sub(c.start).Seconds(), stepAttr)
		o.start(frameKey(ev.ExecutionID, ev.CommandID), c.key, ev.ExecutionID, "frame "+ev.Step, ts,
			AttrStep.String(ev.Step), AttrCommandID.String(ev.CommandID), AttrFrame.Int(ev.Frame),
			AttrRows.Int(len(p.Rows)), AttrWorkerID.String(ev.WorkerID))
	case eventlog.TypeFrameDone:
		var p frameDonePayload
		o.decode(ev, &p)
		counts := map[string]int64{}
		for _, it := range p.Items {
			counts[it.Outcome]++
		}
		for outcome, n := range counts {
			o.inst.rows.Add(ctx, n, metric.WithAttributes(AttrStep.String(ev.Step), AttrOutcome.String(outcome)))
		}
		if n := counts[engine.OutcomeDead]; n > 0 {
			o.inst.deadLetters.Add(ctx, n, stepAttr)
		}
		o.inst.frames.Add(ctx, 1, metric.WithAttributes(AttrStep.String(ev.Step), AttrDrained.Bool(p.Drained)))
		if p.ClaimOpenUs > 0 {
			// Only a frame whose claim committed after its record says
			// how long that took (not a re-issued frame, nor a drained one).
			o.inst.claimOpen.Record(ctx, float64(p.ClaimOpenUs)/1e6, stepAttr)
		}
		attrs := []attribute.KeyValue{AttrRows.Int(len(p.Items)), AttrDrained.Bool(p.Drained),
			attribute.Int64("cursorflow.rows.ok", counts[engine.OutcomeOK]),
			attribute.Int64("cursorflow.rows.error", counts[engine.OutcomeError]),
			attribute.Int64("cursorflow.rows.dead", counts[engine.OutcomeDead])}
		if f := o.get(frameKey(ev.ExecutionID, ev.CommandID)); f != nil {
			f.span.SetAttributes(attrs...)
			o.end(f, ts, p.Fail)
		}
		o.finishCommand(ctx, ev, ts, "frame", p.Fail, attrs...)
	case eventlog.TypeCommandCompleted:
		o.finishCommand(ctx, ev, ts, "completed", "")
	case eventlog.TypeCommandAwaiting:
		o.finishCommand(ctx, ev, ts, "awaiting", "")
	case eventlog.TypeCommandFailed:
		var p completedPayload
		o.decode(ev, &p)
		msg := p.Error
		if msg == "" {
			msg = "command failed"
		}
		o.finishCommand(ctx, ev, ts, "failed", msg, attribute.Bool("cursorflow.retry_wanted", len(p.Retry) > 0 && string(p.Retry) != "null"))
	case eventlog.TypeRetryScheduled:
		o.inst.retries.Add(ctx, 1, stepAttr)
		var p runPayload
		o.decode(ev, &p)
		if s := o.get(stepKey(ev.ExecutionID, p.Run)); s != nil {
			s.span.AddEvent("retry scheduled", trace.WithTimestamp(ts), trace.WithAttributes(AttrCommandID.String(ev.CommandID)))
		}
	case eventlog.TypeStepCompleted, eventlog.TypeStepFailed, eventlog.TypeStepSkipped, eventlog.TypeLoopDone:
		var p runPayload
		o.decode(ev, &p)
		if p.Run == "" {
			p.Run = ev.LoopID
		}
		s := o.get(stepKey(ev.ExecutionID, p.Run))
		if s == nil {
			// A skipped step never ran: record it as an instant.
			s = o.ensureStep(ev, ts, p.Run)
		}
		s.span.SetAttributes(AttrStatus.String(strings.TrimPrefix(ev.Type, "step.")))
		fail := ""
		if ev.Type == eventlog.TypeStepFailed {
			fail = p.Error
			if fail == "" {
				fail = "step failed"
			}
		}
		o.end(s, ts, fail)
	}
}

func (o *Observer) decode(ev eventlog.Event, v any) {
	if len(ev.Payload) == 0 {
		return
	}
	if err := json.Unmarshal(ev.Payload, v); err != nil {
		o.log.Debug("otelobserve: undecodable payload", "execution_id", ev.ExecutionID, "step", ev.Step, "type", ev.Type, "error", err)
	}
}

func (o *Observer) get(key string) *openSpan {
	if el := o.open[key]; el != nil {
		return el.Value.(*openSpan)
	}
	return nil
}

// start opens a span under parentKey (a root span when it is not open).
func (o *Observer) start(key, parentKey, exec, name string, ts time.Time, attrs ...attribute.KeyValue) *openSpan {
	if old := o.get(key); old != nil {
		o.end(old, ts, "superseded")
	}
	ctx := context.Background()
	if p := o.get(parentKey); p != nil {
		ctx = p.ctx
	}
	ctx, span := o.tracer.Start(ctx, name, trace.WithTimestamp(ts), trace.WithAttributes(append(attrs, AttrExecutionID.String(exec))...))
	s := &openSpan{key: key, exec: exec, span: span, ctx: ctx, start: ts, parent: parentKey}
	o.open[key] = o.order.PushBack(s)
	keys := o.execs[exec]
	if keys == nil {
		keys = map[string]struct{}{}
		o.execs[exec] = keys
	}
	keys[key] = struct{}{}
	for o.order.Len() > o.max {
		oldest := o.order.Front().Value.(*openSpan)
		oldest.span.SetAttributes(AttrEvicted.Bool(true))
		o.end(oldest, o.last, "")
	}
	return s
}

// end closes the span at ts, with an error status when fail is set.
func (o *Observer) end(s *openSpan, ts time.Time, fail string) {
	if fail != "" {
		s.span.SetStatus(codes.Error, fail)
	}
	if ts.Before(s.start) {
		ts = s.start
	}
	s.span.End(trace.WithTimestamp(ts))
	if el := o.open[s.key]; el != nil {
		o.order.Remove(el)
		delete(o.open, s.key)
	}
	if keys := o.execs[s.exec]; keys != nil {
		delete(keys, s.key)
		if len(keys) == 0 {
			delete(o.execs, s.exec)
		}
	}
}

func (o *Observer) startExecution(ev eventlog.Event, ts time.Time, p startedPayload, resumed bool) *openSpan {
	name := playbookName(p.Playbook)
	attrs := []attribute.KeyValue{AttrPlaybook.String(name)}
	if resumed {
		attrs = append(attrs, AttrResumed.Bool(true))
	}
	parentKey := ""
	if p.Parent != "" {
		// A sub-playbook's execution nests under its parent's.
		attrs = append(attrs, AttrParentExec.String(p.Parent))
		parentKey = execKey(p.Parent)
	}
	return o.start(execKey(ev.ExecutionID), parentKey, ev.ExecutionID, "execution "+name, ts, attrs...)
}

// ensureExecution returns the execution's span, opening one for an
// execution first seen mid-way (resumed from another process's log).
func (o *Observer) ensureExecution(ev eventlog.Event, ts time.Time) *openSpan {
	if x := o.get(execKey(ev.ExecutionID)); x != nil {
		return x
	}
	return o.startExecution(ev, ts, startedPayload{}, true)
}

func (o *Observer) ensureStep(ev eventlog.Event, ts time.Time, run string) *openSpan {
	if run == "" {
		run = ev.Step
	}
	key := stepKey(ev.ExecutionID, run)
	if s := o.get(key); s != nil {
		return s
	}
	x := o.ensureExecution(ev, ts)
	s := o.start(key, x.key, ev.ExecutionID, "step "+ev.Step, ts, AttrStep.String(ev.Step), AttrRun.String(run))
	s.step = ev.Step
	return s
}

func (o *Observer) issue(ctx context.Context, ev eventlog.Event, ts time.Time, p issuedPayload) {
	if p.Reason == "lease" {
		o.inst.leaseExpiries.Add(ctx, 1, metric.WithAttributes(AttrStep.String(ev.Step)))
	}
	if ev.Attempt > 1 && p.Base != "" {
		// The previous attempt is still open when its lease ran out (or
		// the execution was resumed elsewhere): end it here.
		prev := p.Base + "@" + strconv.Itoa(ev.Attempt-1)
		if f := o.get(frameKey(ev.ExecutionID, prev)); f != nil {
			o.end(f, ts, "re-issued: "+p.Reason)
		}
		if c := o.get(cmdKey(ev.ExecutionID, prev)); c != nil {
			o.end(c, ts, "re-issued: "+p.Reason)
		}
	}
	s := o.ensureStep(ev, ts, p.Run)
	attrs := []attribute.KeyValue{AttrStep.String(ev.Step), AttrCommandID.String(ev.CommandID), AttrKind.String(p.Kind), AttrAttempt.Int(ev.Attempt)}
	if p.Reason != "" {
		attrs = append(attrs, AttrReason.String(p.Reason))
	}
	if p.Kind == engine.KindFrame {
		attrs = append(attrs, AttrFrame.Int(ev.Frame), AttrSlot.Int(p.Slot), AttrLoopID.String(ev.LoopID))
	}
	c := o.start(cmdKey(ev.ExecutionID, ev.CommandID), s.key, ev.ExecutionID, "command "+ev.Step, ts, attrs...)
	c.step, c.kind = ev.Step, p.Kind
}

func (o *Observer) finishCommand(ctx context.Context, ev eventlog.Event, ts time.Time, outcome, fail string, attrs ...attribute.KeyValue) {
	c := o.get(cmdKey(ev.ExecutionID, ev.CommandID))
	if c == nil {
		return
	}
	if outcome == "frame" {
		outcome = "completed"
		if fail != "" {
			outcome = "failed"
		}
	}
	o.inst.commands.Add(ctx, 1, metric.WithAttributes(AttrKind.String(c.kind), AttrOutcome.String(outcome)))
	o.inst.cmdDuration.Record(ctx, ts.Sub(c.start).Seconds(), metric.WithAttributes(AttrKind.String(c.kind), AttrStep.String(c.step)))
	if ev.WorkerID != "" {
		attrs = append(attrs, AttrWorkerID.String(ev.WorkerID))
	}
	c.span.SetAttributes(append(attrs, AttrOutcome.String(outcome))...)
	o.end(c, ts, fail)
}

func (o *Observer) finishExecution(ev eventlog.Event, ts time.Time, status string, p finishedPayload) {
	// Close what is still open beneath (commands cut off by a cancel,
	// for example), children before parents.
	var rest []*openSpan
	for key := range o.execs[ev.ExecutionID] {
		if key != execKey(ev.ExecutionID) {
			rest = append(rest, o.get(key))
		}
	}
	rank := map[byte]int{'f': 0, 'c': 1, 's': 2}
	for lvl := 0; lvl < 3; lvl++ {
		for _, s := range rest {
			if s != nil && rank[s.key[0]] == lvl && o.get(s.key) != nil {
				o.end(s, ts, "execution "+status)
			}
		}
	}
	x := o.get(execKey(ev.ExecutionID))
	if x == nil {
		return
	}
	x.span.SetAttributes(AttrStatus.String(status))
	fail := ""
	if status == engine.StatusFailed {
		fail = p.Message
		if p.Step != "" {
			fail = "step " + p.Step + ": " + fail
		}
		if fail == "" {
			fail = "execution failed"
		}
	}
	if status == engine.StatusCancelled && p.Reason != "" {
		x.span.SetAttributes(AttrReason.String(p.Reason))
	}
	o.end(x, ts, fail)
}

// OpenSpans returns how many spans the observer holds open.
func (o *Observer) OpenSpans() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.order.Len()
}

// playbookName reads metadata.name from a playbook source without
// validating it.
func playbookName(src string) string {
	if src == "" {
		return ""
	}
	var doc struct {
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		return ""
	}
	return doc.Metadata.Name
}
