package eventlog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// The memory log enforces the same rules as the durable backends: seqs
// per execution, and one command.issued per command id.
func ExampleMemory() {
	ctx := context.Background()
	log := eventlog.NewMemory()
	defer log.Close()

	results, err := log.Append(ctx, []eventlog.Event{
		{ExecutionID: "exec-1", Type: eventlog.TypeExecutionStarted, Payload: json.RawMessage(`{"playbook":"demo"}`)},
		{ExecutionID: "exec-1", Type: eventlog.TypeCommandIssued, Step: "fetch", CommandID: "fetch-1"},
		{ExecutionID: "exec-1", Type: eventlog.TypeCommandIssued, Step: "fetch", CommandID: "fetch-1"}, // a retry
		{ExecutionID: "exec-1", Type: eventlog.TypeStepStarted, Step: "fetch"},
	})
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		fmt.Printf("seq=%d duplicate=%v\n", r.Seq, r.Duplicate)
	}

	events, _ := log.Read(ctx, "exec-1", 1, 0)
	for _, e := range events {
		fmt.Println(e.Seq, e.Type, e.CommandID)
	}
	// Output:
	// seq=1 duplicate=false
	// seq=2 duplicate=false
	// seq=0 duplicate=true
	// seq=3 duplicate=false
	// 2 command.issued fetch-1
	// 3 step.started
}

// Wait lets a follower block until an execution grows.
func ExampleMemory_Wait() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	log := eventlog.NewMemory()
	defer log.Close()

	go func() {
		_, _ = log.Append(ctx, []eventlog.Event{{ExecutionID: "exec-1", Type: eventlog.TypeExecutionStarted}})
	}()
	if err := log.Wait(ctx, "exec-1", 0); err != nil {
		panic(err)
	}
	events, _ := log.Read(ctx, "exec-1", 0, 0)
	fmt.Println(events[0].Seq, events[0].Type)
	// Output:
	// 1 execution.started
}

// Executions lists what a restarted orchestrator has to resume.
func ExampleMemory_Executions() {
	ctx := context.Background()
	log := eventlog.NewMemory()
	defer log.Close()

	_, _ = log.Append(ctx, []eventlog.Event{
		{ExecutionID: "a", Type: eventlog.TypeExecutionStarted},
		{ExecutionID: "b", Type: eventlog.TypeExecutionStarted},
		{ExecutionID: "b", Type: eventlog.TypeExecutionCompleted},
		{ExecutionID: "c", Type: eventlog.TypeExecutionStarted},
	})
	unfinished, _ := log.Executions(ctx, eventlog.ExecutionsQuery{Unfinished: true})
	all, _ := log.Executions(ctx, eventlog.ExecutionsQuery{})
	fmt.Println(unfinished, all)
	// Output:
	// [a c] [a b c]
}
