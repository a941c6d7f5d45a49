package natsconsumer_test

import (
	"fmt"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/natsconsumer"
)

// A host registers the driver under the kind its playbooks name.
func Example() {
	reg := cursor.NewRegistry()
	defer reg.Close()
	drv := natsconsumer.New(natsconsumer.Config{})
	if err := reg.Register("natsconsumer", drv); err != nil {
		fmt.Println(err)
		return
	}
	f := drv.Features()
	fmt.Println(reg.Kinds(), "needs ack:", f.NeedsAck, "lease expiry:", f.LeaseExpiry, "fencing:", f.Fencing)
	// Output:
	// [natsconsumer] needs ack: true lease expiry: true fencing: false
}

// Values shows what the loop body sees of a message.
func ExampleValues() {
	fmt.Println(natsconsumer.Values([]byte(`{"id": 7, "name": "ada"}`)))
	fmt.Println(natsconsumer.Values([]byte(`plain text`)))
	// Output:
	// map[id:7 name:ada]
	// map[data:plain text]
}
