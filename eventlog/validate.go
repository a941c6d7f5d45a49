package eventlog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cursorflow/cursorflow/internal/jsonvalid"
)

// ErrInvalidEvent is wrapped by the error Append returns when an event of
// the batch is malformed; the whole batch is then rejected.
var ErrInvalidEvent = errors.New("eventlog: invalid event")

// Validate checks the fields every backend relies on: a non-empty
// ExecutionID and Type, a CommandID on command.issued and a LoopID on
// loop.done and loop.fanin.completed (their uniqueness keys), valid JSON in Payload and Meta when
// they are set, and no NUL bytes in the string fields (PostgreSQL cannot
// store them, so no backend accepts them). The error wraps ErrInvalidEvent.
//
// Backends call Validate on every event before storing anything.
func Validate(e Event) error {
	switch {
	case e.ExecutionID == "":
		return fmt.Errorf("%w: empty execution_id", ErrInvalidEvent)
	case e.Type == "":
		return fmt.Errorf("%w: execution %q: empty type", ErrInvalidEvent, e.ExecutionID)
	case e.Type == TypeCommandIssued && e.CommandID == "":
		return fmt.Errorf("%w: execution %q: %s without command_id", ErrInvalidEvent, e.ExecutionID, e.Type)
	case (e.Type == TypeLoopDone || e.Type == TypeLoopFaninCompleted) && e.LoopID == "":
		return fmt.Errorf("%w: execution %q: %s without loop_id", ErrInvalidEvent, e.ExecutionID, e.Type)
	}
	for _, f := range [...]struct{ name, v string }{
		{"execution_id", e.ExecutionID}, {"type", e.Type}, {"step", e.Step},
		{"command_id", e.CommandID}, {"loop_id", e.LoopID}, {"worker_id", e.WorkerID},
	} {
		if strings.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("%w: execution %q: NUL byte in %s", ErrInvalidEvent, e.ExecutionID, f.name)
		}
	}
	if len(e.Payload) > 0 && !jsonvalid.Valid(e.Payload) {
		return fmt.Errorf("%w: execution %q: %s payload is not valid JSON", ErrInvalidEvent, e.ExecutionID, e.Type)
	}
	if len(e.Meta) > 0 && !jsonvalid.Valid(e.Meta) {
		return fmt.Errorf("%w: execution %q: %s meta is not valid JSON", ErrInvalidEvent, e.ExecutionID, e.Type)
	}
	return nil
}

// ValidateBatch validates every event of a batch and reports the first
// problem with its index.
func ValidateBatch(events []Event) error {
	for i := range events {
		if err := Validate(events[i]); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

// UniqueKey returns the key under which the log enforces the uniqueness of
// e within its execution ("command:<id>" for command.issued, "loop:<id>"
// for loop.done, "fanin:<id>" for loop.fanin.completed) and false for
// every other type.
func UniqueKey(e Event) (string, bool) {
	switch e.Type {
	case TypeCommandIssued:
		return "command:" + e.CommandID, true
	case TypeLoopDone:
		return "loop:" + e.LoopID, true
	case TypeLoopFaninCompleted:
		return "fanin:" + e.LoopID, true
	}
	return "", false
}
