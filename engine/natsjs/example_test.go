package natsjs_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// The orchestrator: an engine without workers of its own whose commands
// go out over JetStream, and the consumer of the workers' reports.
func ExampleNewDispatcher() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	d, err := natsjs.NewDispatcher(ctx, natsjs.Config{Conn: nc})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	log := eventlog.NewMemory() // a shared, durable log (postgres) in production
	e, err := engine.New(engine.Config{Log: log, Workers: 0, Dispatcher: d})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	// Resume what an earlier orchestrator left unfinished before serving
	// reports, so none is dropped as belonging to an unknown execution.
	ids, _ := log.Executions(ctx, eventlog.ExecutionsQuery{Unfinished: true})
	for _, id := range ids {
		_ = e.Resume(ctx, id)
	}
	go func() { _ = d.Serve(ctx, e.Reporter()) }()
	id, err := e.Start(ctx, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: hello}
workflow:
  - step: start
    tool: {kind: noop, greeting: hello}
`), engine.StartOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	sum, _ := e.Wait(ctx, id)
	fmt.Println(sum.Status)
}

// A worker process: it serves the "default" pool until interrupted, then
// lets running commands finish.
func ExampleNewWorker() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	treg := tools.NewRegistry() // tools/builtin registers the standard tools
	w, err := natsjs.NewWorker(ctx, natsjs.Config{Conn: nc}, natsjs.WorkerOptions{
		Worker:      &engine.Worker{ID: "worker-1", Tools: treg},
		Concurrency: 8,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = w.Run(ctx)
}
