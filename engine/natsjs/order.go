package natsjs

import "sync"

// headerCommand carries a report's command id, so that the orchestrator
// side can keep one command's reports in their stream order while it
// records the reports of different commands concurrently.
const headerCommand = "Cf-Command"

// commandOrder hands the reports of one command to the engine one at a
// time, in the order the events stream delivered them: a command's
// partial results come before its final report, which the engine would
// otherwise refuse them after. Reports of different commands (and those
// without a command id) do not wait for each other.
type commandOrder struct {
	mu   sync.Mutex
	last map[string]chan struct{} // a command's latest report: closed once recorded
}

// enter is called in stream order, before the report's goroutine starts.
// The goroutine waits on prev (nil: nothing to wait for) before it
// records the report, and calls done afterwards.
func (o *commandOrder) enter(command string) (prev <-chan struct{}, done func()) {
	if command == "" {
		return nil, func() {}
	}
	mine := make(chan struct{})
	o.mu.Lock()
	if o.last == nil {
		o.last = map[string]chan struct{}{}
	}
	if p := o.last[command]; p != nil {
		prev = p
	}
	o.last[command] = mine
	o.mu.Unlock()
	return prev, func() {
		close(mine)
		o.mu.Lock()
		if o.last[command] == mine {
			delete(o.last, command)
		}
		o.mu.Unlock()
	}
}
