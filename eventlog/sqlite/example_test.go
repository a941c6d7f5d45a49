package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"
)

// A SQLite log keeps its history across restarts: a reopened file
// continues the seqs and still knows which commands were issued.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "eventlog-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.db")

	log, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		panic(err)
	}
	_, _ = log.Append(ctx, []eventlog.Event{
		{ExecutionID: "exec-1", Type: eventlog.TypeExecutionStarted},
		{ExecutionID: "exec-1", Type: eventlog.TypeCommandIssued, CommandID: "c1"},
	})
	_ = log.Close()

	log, err = sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer log.Close()
	res, _ := log.Append(ctx, []eventlog.Event{
		{ExecutionID: "exec-1", Type: eventlog.TypeCommandIssued, CommandID: "c1"},
		{ExecutionID: "exec-1", Type: eventlog.TypeStepStarted, Step: "fetch"},
	})
	fmt.Println(res[0].Duplicate, res[1].Seq)
	// Output:
	// true 3
}
