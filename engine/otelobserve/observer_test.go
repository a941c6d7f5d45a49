package otelobserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/otelobserve"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

type bundle struct {
	obs    *otelobserve.Observer
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func setup(t *testing.T, maxOpen int) *bundle {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	obs := otelobserve.New(otelobserve.Config{TracerProvider: tp, MeterProvider: mp, MaxOpenSpans: maxOpen,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	return &bundle{obs: obs, spans: rec, reader: reader}
}

// metric sums the data points of the named metric whose attributes
// include every one of attrs: the value for sums, the count for
// histograms (and their sum as the second result).
func (b *bundle) metric(t *testing.T, name string, attrs ...attribute.KeyValue) (float64, float64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := b.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	match := func(set attribute.Set) bool {
		for _, kv := range attrs {
			v, ok := set.Value(kv.Key)
			if !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	var val, sum float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						val += float64(p.Value)
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						val += float64(p.Count)
						sum += p.Sum
					}
				}
			default:
				t.Fatalf("metric %s: unexpected data %T", name, m.Data)
			}
		}
	}
	return val, sum
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func byName(spans []sdktrace.ReadOnlySpan) map[string][]sdktrace.ReadOnlySpan {
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		out[s.Name()] = append(out[s.Name()], s)
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// history is a cursor loop's events as the engine writes them: two frame
// slots, one frame re-issued after its lease expired, a dead letter, then
// a plain step whose first attempt fails and is retried.
func history(t0 time.Time) []eventlog.Event {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	x := "exec-1"
	pb := "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: drain}\nworkflow: []\n"
	items := func(outcomes ...string) []engine.ItemOutcome {
		var out []engine.ItemOutcome
		for i, o := range outcomes {
			out = append(out, engine.ItemOutcome{Key: fmt.Sprint(i), Outcome: o, Ms: 1})
		}
		return out
	}
	rows := func(n int) any {
		r := make([]map[string]any, n)
		for i := range r {
			r[i] = map[string]any{"key": fmt.Sprint(i), "values": map[string]any{"id": i}}
		}
		return map[string]any{"rows": r}
	}
	evs := []eventlog.Event{
		{Type: eventlog.TypeExecutionStarted, Time: at(0), Payload: mustJSON(map[string]any{"playbook": pb, "workload": map[string]any{}})},
		{Type: eventlog.TypeLoopStarted, Step: "start", LoopID: "start#1", Time: at(1), Payload: mustJSON(map[string]any{"run": "start#1", "mode": "cursor", "max_in_flight": 2})},
		{Type: eventlog.TypeCommandIssued, Step: "start", LoopID: "start#1", CommandID: "f0@1", Attempt: 1, Frame: 1, Time: at(2), Payload: mustJSON(map[string]any{"kind": "frame", "run": "start#1", "base": "f0", "slot": 0})},
		{Type: eventlog.TypeCommandIssued, Step: "start", LoopID: "start#1", CommandID: "f1@1", Attempt: 1, Frame: 1, Time: at(2), Payload: mustJSON(map[string]any{"kind": "frame", "run": "start#1", "base": "f1", "slot": 1})},
		{Type: eventlog.TypeFrameClaimed, Step: "start", CommandID: "f0@1", Attempt: 1, WorkerID: "w1", Time: at(12), Payload: mustJSON(rows(3))},
		{Type: eventlog.TypeFrameClaimed, Step: "start", CommandID: "f1@1", Attempt: 1, WorkerID: "w2", Time: at(32), Payload: mustJSON(rows(2))},
		{Type: eventlog.TypeFrameDone, Step: "start", CommandID: "f0@1", Attempt: 1, WorkerID: "w1", Time: at(50), Payload: mustJSON(map[string]any{"items": items("ok", "ok", "dead"), "claim_open_us": 2500})},
		// f1's worker died: the lease ran out, the frame is re-issued.
		{Type: eventlog.TypeCommandIssued, Step: "start", LoopID: "start#1", CommandID: "f1@2", Attempt: 2, Frame: 1, Time: at(100), Payload: mustJSON(map[string]any{"kind": "frame", "run": "start#1", "base": "f1", "slot": 1, "reason": "lease"})},
		{Type: eventlog.TypeFrameClaimed, Step: "start", CommandID: "f1@2", Attempt: 2, WorkerID: "w3", Time: at(104), Payload: mustJSON(rows(2))},
		{Type: eventlog.TypeFrameDone, Step: "start", CommandID: "f1@2", Attempt: 2, WorkerID: "w3", Time: at(110), Payload: mustJSON(map[string]any{"items": items("ok", "error"), "drained": true, "claim_open_us": 1500})},
		{Type: eventlog.TypeLoopDone, Step: "start", LoopID: "start#1", Time: at(111), Payload: mustJSON(map[string]any{"run": "start#1"})},
		{Type: eventlog.TypeCommandIssued, Step: "report", CommandID: "r@1", Attempt: 1, Time: at(112), Payload: mustJSON(map[string]any{"kind": "step", "run": "report#1", "base": "r"})},
		{Type: eventlog.TypeCommandFailed, Step: "report", CommandID: "r@1", Attempt: 1, Time: at(120), Payload: mustJSON(map[string]any{"error": "boom", "retry": map[string]any{"delay": 1}})},
		{Type: eventlog.TypeRetryScheduled, Step: "report", CommandID: "r@1", Attempt: 1, Time: at(120), Payload: mustJSON(map[string]any{"run": "report#1", "base": "r"})},
		{Type: eventlog.TypeCommandIssued, Step: "report", CommandID: "r@2", Attempt: 2, Time: at(130), Payload: mustJSON(map[string]any{"kind": "step", "run": "report#1", "base": "r", "reason": "retry"})},
		{Type: eventlog.TypeCommandCompleted, Step: "report", CommandID: "r@2", Attempt: 2, Time: at(140), Payload: mustJSON(map[string]any{"output": map[string]any{"status": "success"}})},
		{Type: eventlog.TypeStepCompleted, Step: "report", Time: at(141), Payload: mustJSON(map[string]any{"run": "report#1"})},
		{Type: eventlog.TypeExecutionCompleted, Time: at(142), Payload: mustJSON(map[string]any{})},
	}
	for i := range evs {
		evs[i].ExecutionID = x
		evs[i].Seq = int64(i + 1)
	}
	return evs
}

func TestTracesAndMetricsFromHistory(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, ev := range history(t0) {
		b.obs.Observe(ev)
	}
	if n := b.obs.OpenSpans(); n != 0 {
		t.Fatalf("%d spans left open after the terminal event", n)
	}
	spans := byName(b.spans.Ended())
	one := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		if len(spans[name]) != 1 {
			t.Fatalf("%d spans named %q; all: %v", len(spans[name]), name, keys(spans))
		}
		return spans[name][0]
	}
	exec := one("execution drain")
	loop := one("step start")
	report := one("step report")
	if got := attr(exec, otelobserve.AttrPlaybook).AsString(); got != "drain" {
		t.Errorf("playbook attribute %q", got)
	}
	if exec.Parent().IsValid() {
		t.Error("execution span has a parent")
	}
	if !exec.StartTime().Equal(t0) || !exec.EndTime().Equal(t0.Add(142*time.Millisecond)) {
		t.Errorf("execution span %v..%v, want the events' times", exec.StartTime(), exec.EndTime())
	}
	for _, s := range []sdktrace.ReadOnlySpan{loop, report} {
		if s.Parent().SpanID() != exec.SpanContext().SpanID() || s.SpanContext().TraceID() != exec.SpanContext().TraceID() {
			t.Errorf("%s is not a child of the execution span", s.Name())
		}
	}
	if !loop.StartTime().Equal(t0.Add(time.Millisecond)) || !loop.EndTime().Equal(t0.Add(111*time.Millisecond)) {
		t.Errorf("loop step span %v..%v", loop.StartTime(), loop.EndTime())
	}
	frames := spans["command start"]
	if len(frames) != 3 {
		t.Fatalf("%d command spans for frames, want 3 (two slots, one re-issue)", len(frames))
	}
	for _, c := range frames {
		if c.Parent().SpanID() != loop.SpanContext().SpanID() {
			t.Errorf("frame command %s is not under the loop step", attr(c, otelobserve.AttrCommandID).AsString())
		}
		if attr(c, otelobserve.AttrCommandID).AsString() == "f1@1" && c.Status().Code != codes.Error {
			t.Errorf("expired attempt f1@1 ended with status %v", c.Status())
		}
	}
	// Frame spans (claim → frame.done) sit under their command span.
	var frameSpans []sdktrace.ReadOnlySpan
	cmdIDs := map[trace.SpanID]string{}
	for _, c := range frames {
		cmdIDs[c.SpanContext().SpanID()] = attr(c, otelobserve.AttrCommandID).AsString()
	}
	for _, s := range b.spans.Ended() {
		if _, ok := cmdIDs[s.Parent().SpanID()]; ok {
			frameSpans = append(frameSpans, s)
		}
	}
	if len(frameSpans) != 3 || len(spans["frame start"]) != 3 {
		t.Fatalf("%d frame spans under frame commands, want 3", len(frameSpans))
	}
	for _, f := range frameSpans {
		if cmdIDs[f.Parent().SpanID()] == "f0@1" {
			if !f.StartTime().Equal(t0.Add(12*time.Millisecond)) || !f.EndTime().Equal(t0.Add(50*time.Millisecond)) {
				t.Errorf("frame f0@1 span %v..%v", f.StartTime(), f.EndTime())
			}
			if attr(f, otelobserve.AttrRows).AsInt64() != 3 {
				t.Errorf("frame f0@1 rows %v", attr(f, otelobserve.AttrRows))
			}
		}
	}
	var r1, r2 sdktrace.ReadOnlySpan
	for _, s := range b.spans.Ended() {
		switch attr(s, otelobserve.AttrCommandID).AsString() {
		case "r@1":
			r1 = s
		case "r@2":
			r2 = s
		}
	}
	if r1 == nil || r2 == nil || r1.Status().Code != codes.Error || r1.Status().Description != "boom" || r2.Status().Code == codes.Error {
		t.Fatalf("report attempts: %v %v", r1, r2)
	}
	if r1.Parent().SpanID() != report.SpanContext().SpanID() || r2.Parent().SpanID() != report.SpanContext().SpanID() {
		t.Error("report commands are not under the report step span")
	}
	if len(report.Events()) != 1 || report.Events()[0].Name != "retry scheduled" {
		t.Errorf("report step events %v", report.Events())
	}

	step := otelobserve.AttrStep.String("start")
	for _, tc := range []struct {
		name  string
		attrs []attribute.KeyValue
		want  float64
	}{
		{"cursorflow.rows", []attribute.KeyValue{step, otelobserve.AttrOutcome.String("ok")}, 3},
		{"cursorflow.rows", []attribute.KeyValue{step, otelobserve.AttrOutcome.String("error")}, 1},
		{"cursorflow.rows", []attribute.KeyValue{step, otelobserve.AttrOutcome.String("dead")}, 1},
		{"cursorflow.dead_letters", []attribute.KeyValue{step}, 1},
		{"cursorflow.frames", []attribute.KeyValue{step}, 2},
		{"cursorflow.frames", []attribute.KeyValue{step, otelobserve.AttrDrained.Bool(true)}, 1},
		{"cursorflow.lease.expiries", []attribute.KeyValue{step}, 1},
		{"cursorflow.retries", []attribute.KeyValue{otelobserve.AttrStep.String("report")}, 1},
		{"cursorflow.frame.claim.latency", []attribute.KeyValue{step}, 3},
		{"cursorflow.frame.claim.open", []attribute.KeyValue{step}, 2},
		{"cursorflow.executions", []attribute.KeyValue{otelobserve.AttrStatus.String("completed")}, 1},
		{"cursorflow.events", nil, 18},
		{"cursorflow.events", []attribute.KeyValue{otelobserve.AttrEventType.String("command.issued")}, 5},
		{"cursorflow.commands", []attribute.KeyValue{otelobserve.AttrKind.String("step"), otelobserve.AttrOutcome.String("failed")}, 1},
	} {
		if got, _ := b.metric(t, tc.name, tc.attrs...); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.attrs, got, tc.want)
		}
	}
	// Claim latency: 10ms, 30ms and 4ms.
	if _, sum := b.metric(t, "cursorflow.frame.claim.latency", step); sum < 0.0439 || sum > 0.0441 {
		t.Errorf("claim latency sum %v s, want 0.044", sum)
	}
	// Claims open 2.5 ms and 1.5 ms (the frames that say so).
	if _, sum := b.metric(t, "cursorflow.frame.claim.open", step); sum < 0.00399 || sum > 0.00401 {
		t.Errorf("claim open sum %v s, want 0.004", sum)
	}
}

func keys(m map[string][]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestOpenSpansBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, 5)
	t0 := time.Now()
	b.obs.Observe(eventlog.Event{ExecutionID: "x", Seq: 1, Type: eventlog.TypeExecutionStarted, Time: t0})
	// Commands whose completions never arrive (another process finished
	// them, say) must not pile up.
	for i := range 100 {
		b.obs.Observe(eventlog.Event{ExecutionID: "x", Seq: int64(i + 2), Type: eventlog.TypeCommandIssued, Step: "s",
			CommandID: fmt.Sprintf("c%d@1", i), Attempt: 1, Time: t0.Add(time.Duration(i) * time.Millisecond),
			Payload: mustJSON(map[string]any{"kind": "item", "run": "s#1", "base": fmt.Sprintf("c%d", i)})})
		if n := b.obs.OpenSpans(); n > 5 {
			t.Fatalf("%d open spans, bound 5", n)
		}
	}
	evicted := 0
	for _, s := range b.spans.Ended() {
		if attr(s, otelobserve.AttrEvicted).AsBool() {
			evicted++
		}
	}
	if evicted < 95 {
		t.Fatalf("%d spans marked evicted, want >= 95", evicted)
	}
	// The execution's end closes the rest.
	b.obs.Observe(eventlog.Event{ExecutionID: "x", Seq: 200, Type: eventlog.TypeExecutionCancelled, Time: t0.Add(time.Second)})
	if n := b.obs.OpenSpans(); n != 0 {
		t.Fatalf("%d spans open after the execution ended", n)
	}
}

func TestUnknownAndMalformedEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	// None of these may panic or leave spans behind.
	for _, ev := range []eventlog.Event{
		{ExecutionID: "y", Type: eventlog.TypeCommandCompleted, CommandID: "nope@1"},
		{ExecutionID: "y", Type: eventlog.TypeFrameDone, CommandID: "nope@1", Payload: json.RawMessage(`{"items": "not a list"}`)},
		{ExecutionID: "y", Type: eventlog.TypeFrameClaimed, CommandID: "nope@1", Payload: json.RawMessage(`[`)},
		{ExecutionID: "y", Type: eventlog.TypeExecutionStarted, Payload: json.RawMessage(`{"playbook": ": : :"}`)},
		{ExecutionID: "y", Type: "something.new"},
		{ExecutionID: "y", Type: eventlog.TypeStepSkipped, Step: "s", Payload: mustJSON(map[string]any{"run": "s#1"})},
		{ExecutionID: "y", Type: eventlog.TypeExecutionFailed, Payload: mustJSON(map[string]any{"step": "s", "message": "bad"})},
	} {
		b.obs.Observe(ev)
	}
	if n := b.obs.OpenSpans(); n != 0 {
		t.Fatalf("%d spans open", n)
	}
	spans := byName(b.spans.Ended())
	if len(spans["step s"]) != 1 || len(spans["execution "]) != 1 {
		t.Fatalf("spans %v", keys(spans))
	}
	if st := spans["execution "][0].Status(); st.Code != codes.Error || st.Description != "step s: bad" {
		t.Errorf("failed execution status %v", st)
	}
}

// channelDispatcher is a transport inside the test: commands travel over a
// channel to a goroutine that runs them on the engine's worker.
type channelDispatcher struct{ ch chan *engine.Command }

func (d channelDispatcher) Dispatch(cmd *engine.Command) { d.ch <- cmd }
func (d channelDispatcher) Durable() bool                { return false }
func (d channelDispatcher) Cancel(string)                {}

func TestEngineTracesAndPropagation(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	var mu sync.Mutex
	parents := map[string]trace.SpanContext{} // command id → remote parent the worker saw
	reg := tools.NewRegistry()
	reg.MustRegister("echo", tools.ToolFunc(func(ctx context.Context, c *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess, Data: c.Config}, nil
	}))
	d := channelDispatcher{ch: make(chan *engine.Command, 64)}
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Workers: 0, Dispatcher: b.obs.WrapDispatcher(d),
		Observer: b.obs, Tick: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case cmd := <-d.ch:
				// Like a remote worker: only the Meta crosses over.
				wire, _ := json.Marshal(cmd.Meta)
				var meta map[string]string
				_ = json.Unmarshal(wire, &meta)
				rctx := otelobserve.Extract(ctx, meta)
				mu.Lock()
				parents[cmd.ID] = trace.SpanContextFromContext(rctx)
				mu.Unlock()
				_ = e.Worker().Execute(rctx, cmd, e.Reporter())
			case <-ctx.Done():
				return
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = e.Close()
	})
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fan}
workflow:
  - step: start
    tool: {kind: echo}
    next: [each]
  - step: each
    loop:
      in: '{{ [1, 2, 3] }}'
      iterator: n
      spec: {mode: parallel, max_in_flight: 2}
    tool: {kind: echo, n: '{{ iter.n }}'}
`
	id, err := e.Start(ctx, []byte(src), engine.StartOptions{File: "fan.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("execution: %v %+v", err, sum)
	}
	if n := b.obs.OpenSpans(); n != 0 {
		t.Fatalf("%d spans open after completion", n)
	}
	spans := b.spans.Ended()
	named := byName(spans)
	exec := named["execution fan"]
	if len(exec) != 1 || len(named["step start"]) != 1 || len(named["step each"]) != 1 ||
		len(named["command each"]) != 3 || len(named["command start"]) != 1 {
		t.Fatalf("spans %v", keys(named))
	}
	traceID := exec[0].SpanContext().TraceID()
	bySpanID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("span %s in another trace", s.Name())
		}
		bySpanID[s.SpanContext().SpanID()] = s
	}
	// Every command's worker saw the command span as its remote parent.
	mu.Lock()
	defer mu.Unlock()
	if len(parents) != 4 {
		t.Fatalf("%d commands crossed the transport, want 4", len(parents))
	}
	for cmdID, sc := range parents {
		if !sc.IsValid() || !sc.IsRemote() || sc.TraceID() != traceID {
			t.Fatalf("command %s: remote parent %v", cmdID, sc)
		}
		s := bySpanID[sc.SpanID()]
		if s == nil || attr(s, otelobserve.AttrCommandID).AsString() != cmdID {
			t.Fatalf("command %s: traceparent names span %v", cmdID, s)
		}
		if !strings.HasPrefix(s.Name(), "command ") {
			t.Fatalf("command %s: parent span %s", cmdID, s.Name())
		}
	}
}

func TestInjectExtract(t *testing.T) {
	t.Parallel()
	if m := otelobserve.Inject(context.Background(), nil); m != nil {
		t.Fatalf("Inject without a span wrote %v", m)
	}
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "op")
	defer span.End()
	meta := otelobserve.Inject(ctx, map[string]string{"other": "kept"})
	want := fmt.Sprintf("00-%s-%s-01", span.SpanContext().TraceID(), span.SpanContext().SpanID())
	if meta["traceparent"] != want || meta["other"] != "kept" {
		t.Fatalf("meta %v, want traceparent %s", meta, want)
	}
	sc := trace.SpanContextFromContext(otelobserve.Extract(context.Background(), meta))
	if sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() || !sc.IsRemote() {
		t.Fatalf("extracted %v", sc)
	}
	if got := otelobserve.Extract(context.Background(), map[string]string{"traceparent": "garbage"}); trace.SpanContextFromContext(got).IsValid() {
		t.Fatal("garbage traceparent extracted as valid")
	}
}

func TestSetupPrometheusAndOTLP(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	paths := map[string]int{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths[r.Method+" "+r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	ctx := context.Background()
	obs, handler, shutdown, err := otelobserve.Setup(ctx, otelobserve.Config{OTLPEndpoint: collector.URL, Prometheus: true, ServiceName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if handler == nil {
		t.Fatal("no metrics handler with Prometheus set")
	}
	for _, ev := range history(time.Now()) {
		obs.Observe(ev)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`cursorflow_rows_total{`, `cursorflow_outcome="dead"`, `cursorflow_dead_letters_total{`,
		`cursorflow_frame_claim_latency_seconds_bucket{`, `cursorflow_frame_claim_open_seconds_bucket{`, `cursorflow_lease_expiries_total{`, `go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if paths["POST /v1/traces"] == 0 || paths["POST /v1/metrics"] == 0 {
		t.Fatalf("collector received %v, want traces and metrics on shutdown", paths)
	}

	if _, _, _, err := otelobserve.Setup(ctx, otelobserve.Config{OTLPEndpoint: "collector:4318"}); err == nil {
		t.Error("Setup accepted an endpoint without a scheme")
	}
	obs, handler, shutdown, err = otelobserve.Setup(ctx, otelobserve.Config{})
	if err != nil || handler != nil || obs == nil {
		t.Fatalf("Setup without exporters: %v %v", handler, err)
	}
	obs.Observe(history(time.Now())[0])
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
