package faultlog_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/faultlog"
)

// The first append of a worker's report fails once, before the store;
// the next one goes through.
func Example() {
	ctx := context.Background()
	log := faultlog.New(eventlog.NewMemory())
	defer log.Close()
	log.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 1, Match: faultlog.HasType(eventlog.TypeCommandCompleted)})

	report := []eventlog.Event{{ExecutionID: "x", Type: eventlog.TypeCommandCompleted}}
	_, err := log.Append(ctx, report)
	fmt.Println(errors.Is(err, faultlog.ErrInjected))
	_, err = log.Append(ctx, report)
	fmt.Println(err)
	fmt.Println(log.Hits(faultlog.OpAppend), "of", log.Calls(faultlog.OpAppend), "appends failed")
	// Output:
	// true
	// <nil>
	// 1 of 2 appends failed
}
