package engine_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// BenchmarkLoopBack times one round of a playbook that re-enters a
// collection loop step again and again, at 100 and at 1,000 rounds: with
// finished loops compacted out of the state the cost of a round does not
// grow with the rounds before it (it grew linearly, the whole run
// quadratically, while every loop ever started was kept and sorted at
// each decision).
//
//	go test -run '^$' -bench LoopBack -benchtime 3x ./engine
func BenchmarkLoopBack(b *testing.B) {
	for _, rounds := range []int{100, 1000} {
		b.Run(strconv.Itoa(rounds), func(b *testing.B) {
			src := strings.Replace(loopBack, "workload: {n: 150}", "workload: {n: "+strconv.Itoa(rounds)+"}", 1)
			reg := tools.NewRegistry()
			reg.MustRegister("rec", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
				return tools.Output{Status: tools.StatusSuccess}, nil
			}))
			e, err := engine.New(engine.Config{Log: eventlog.NewMemory(), Tools: reg, Tick: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				id, err := e.Start(ctx, []byte(src), engine.StartOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if sum, err := e.Wait(ctx, id); err != nil || sum.Status != engine.StatusCompleted {
					b.Fatalf("%v %+v", err, sum)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rounds), "ns/round")
		})
	}
}
