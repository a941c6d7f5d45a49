package pftflow

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/internal/pftapi"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

var pftSize = flag.String("pft.size", "2x25", "facilities x patients per facility for BenchmarkPFTFlow (NoETL's own run is 10x1000)")

// BenchmarkPFTFlow runs the unchanged flow through the CLI and reports its
// wall time against the rate-limit bound: the requests the API answered
// divided by its rate limit is the least time any client could take.
//
//	go test ./examples/pftflow -run '^$' -bench PFTFlow -benchtime 1x -pft.size 10x100
func BenchmarkPFTFlow(b *testing.B) {
	var facilities, patients int
	if _, err := fmt.Sscanf(*pftSize, "%dx%d", &facilities, &patients); err != nil || facilities < 1 || patients < 1 {
		b.Fatalf("-pft.size %q: want FxP, e.g. 10x100", *pftSize)
	}
	bin := testenv.CLI(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r := newRun(b, facilities, patients, pftapi.Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
		b.StartTimer()
		out, err := exec.CommandContext(ctx, bin, append([]string{"run", flowFile(b)}, r.runArgs()...)...).CombinedOutput()
		b.StopTimer()
		cancel()
		if err != nil {
			b.Fatalf("cursorflow run: %v\n%s", err, out)
		}
		s := testenv.ParseSummary(b, out)
		if s.Status != "completed" {
			b.Fatalf("execution %s", s.Status)
		}
		st := r.api.Stats()
		var answered int64
		for _, n := range st.Answered {
			answered += n
		}
		bound := float64(answered) / float64(r.rateLimit)
		n := float64(facilities * patients)
		b.ReportMetric(s.Seconds, "wall-s")
		b.ReportMetric(bound, "bound-s")
		b.ReportMetric(s.Seconds/bound, "x-bound")
		b.ReportMetric(float64(s.Events)/n, "events/patient")
		b.ReportMetric(float64(answered), "requests")
		b.ReportMetric(float64(st.RateLimited), "throttled")
	}
}
