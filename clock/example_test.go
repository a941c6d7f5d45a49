package clock_test

import (
	"fmt"
	"time"

	"github.com/cursorflow/cursorflow/clock"
)

// A test moves a fake clock by hand: a one-minute timer fires when the
// clock says a minute has passed, at once, without waiting.
func ExampleFake() {
	c := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	lease := c.NewTimer(time.Minute)
	c.Advance(59 * time.Second)
	select {
	case <-lease.C():
		fmt.Println("expired early")
	default:
		fmt.Println("still leased at", c.Now().Format("15:04:05"))
	}
	c.Advance(time.Second)
	fmt.Println("expired at", (<-lease.C()).Format("15:04:05"))
	// Output:
	// still leased at 12:00:59
	// expired at 12:01:00
}
