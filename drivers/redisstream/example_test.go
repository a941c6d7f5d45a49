package redisstream_test

import (
	"fmt"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/redisstream"
)

// A host registers the driver under the kind its playbooks name.
func Example() {
	reg := cursor.NewRegistry()
	defer reg.Close()
	drv := redisstream.New(redisstream.Config{PoolSize: 16})
	if err := reg.Register("redisstream", drv); err != nil {
		fmt.Println(err)
		return
	}
	f := drv.Features()
	fmt.Println(reg.Kinds(), "needs ack:", f.NeedsAck, "lease expiry:", f.LeaseExpiry, "fencing:", f.Fencing)
	// Output:
	// [redisstream] needs ack: true lease expiry: true fencing: true
}

// ParseOptions shows the defaults a cursor block gets.
func ExampleParseOptions() {
	o, err := redisstream.ParseOptions(map[string]any{"stream": "jobs"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%+v\n", o)
	// Output:
	// {Stream:jobs Group: Consumer:slot DeadLetterStream:jobs:dead Start:0 DeleteAcked:false}
}
