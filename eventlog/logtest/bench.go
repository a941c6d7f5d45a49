package logtest

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
)

// Bench measures append throughput of logs made by newLog and reports
// events/s for four shapes: one event per Append, batches of 5 (what the
// engine appends per frame) and of 100 events, and single-event appends
// from parallel goroutines, each to its own execution.
func Bench(b *testing.B, newLog func(b *testing.B) eventlog.Log) {
	payload := json.RawMessage(`{"status":"success","data":{"rows":3,"duration_ms":12}}`)
	event := func(exec string) eventlog.Event {
		return eventlog.Event{ExecutionID: exec, Type: eventlog.TypeStepCompleted, Step: "step", Payload: payload}
	}
	report := func(b *testing.B, events int64) {
		b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	}
	b.Run("single", func(b *testing.B) {
		l := newLog(b)
		exec := ExecutionID("bench-single")
		batch := []eventlog.Event{event(exec)}
		for b.Loop() {
			if _, err := l.Append(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
		}
		report(b, int64(b.N))
	})
	for _, size := range []int{5, 100} {
		b.Run(fmt.Sprintf("batch%d", size), func(b *testing.B) {
			l := newLog(b)
			exec := ExecutionID("bench-batch")
			batch := make([]eventlog.Event, size)
			for i := range batch {
				batch[i] = event(exec)
			}
			for b.Loop() {
				if _, err := l.Append(b.Context(), batch); err != nil {
					b.Fatal(err)
				}
			}
			report(b, int64(b.N)*int64(len(batch)))
		})
	}
	b.Run("parallel", func(b *testing.B) {
		l := newLog(b)
		var n, worker atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			exec := ExecutionID(fmt.Sprintf("bench-par-%d", worker.Add(1)))
			batch := []eventlog.Event{event(exec)}
			for pb.Next() {
				if _, err := l.Append(b.Context(), batch); err != nil {
					b.Error(err)
					return
				}
				n.Add(1)
			}
		})
		report(b, n.Load())
	})
}
