package dsl

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FieldError is a field whose template rendered to something the field
// cannot take. Field is the field's path (loop.spec.max_in_flight, ...);
// callers add the step.
type FieldError struct {
	Field string
	Err   error
}

// Error formats the error as field: cause.
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }

// frameNumbers are the frame fields that may be templates, with the kind
// of number each takes.
var frameNumbers = map[string]numberKind{
	"max_rows": wholeNumber, "row_concurrency": wholeNumber, "max_bytes": wholeNumber, "max_attempts": wholeNumber,
	"lease_seconds": frameSeconds, "heartbeat_seconds": frameSeconds, "max_seconds": frameSeconds,
}

type numberKind uint8

// Bounds of a loop's numbers: beyond them a value is a mistake (a lease
// of years, which overflows a duration past about 292 years; more slots
// or items in flight than any pool has workers, each re-issued untaken
// at every lease).
const (
	// MaxFrameSeconds bounds lease_seconds, heartbeat_seconds and
	// max_seconds: 30 days.
	MaxFrameSeconds = 30 * 24 * 3600
	// MaxInFlight bounds a loop's max_in_flight.
	MaxInFlight = 10000
)

const (
	realNumber numberKind = iota
	wholeNumber
	// frameSeconds is a real number of at most MaxFrameSeconds.
	frameSeconds
)

// renderNumber renders a numeric field's template. The result must be a
// finite, non-negative number (a numeric string counts), and whole when
// kind says so.
func renderNumber(t *Template, scope map[string]any, field string, kind numberKind) (float64, error) {
	v, err := t.Render(scope)
	if err != nil {
		return 0, &FieldError{Field: field, Err: err}
	}
	return numberOf(v, field, kind)
}

// numberOf checks a rendered value as renderNumber documents.
func numberOf(v any, field string, kind numberKind) (float64, error) {
	var f float64
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case float64:
		f = x
	case string:
		p, perr := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if perr != nil {
			return 0, &FieldError{Field: field, Err: fmt.Errorf("rendered %q, want a number", shorten(x))}
		}
		f = p
	default:
		return 0, &FieldError{Field: field, Err: fmt.Errorf("rendered %s, want a number", describeValue(v))}
	}
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, &FieldError{Field: field, Err: fmt.Errorf("rendered %v, want a finite number", f)}
	case f < 0:
		return 0, &FieldError{Field: field, Err: fmt.Errorf("rendered %v, must not be negative", f)}
	case kind == wholeNumber && (f != math.Trunc(f) || f > math.MaxInt32):
		return 0, &FieldError{Field: field, Err: fmt.Errorf("rendered %v, want a whole number", f)}
	case kind == frameSeconds && f > MaxFrameSeconds:
		return 0, &FieldError{Field: field, Err: fmt.Errorf("rendered %v, more than %d seconds (30 days)", f, MaxFrameSeconds)}
	}
	return f, nil
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

func describeValue(v any) string {
	switch v.(type) {
	case nil:
		return "nothing (none or undefined)"
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%v", v)
}

func renderSeconds(t *Template, scope map[string]any, field string) (time.Duration, error) {
	v, err := t.Render(scope)
	if err != nil {
		return 0, &FieldError{Field: field, Err: err}
	}
	if s, ok := v.(string); ok {
		if d, derr := time.ParseDuration(strings.TrimSpace(s)); derr == nil && d >= 0 {
			return d, nil
		}
	}
	f, err := numberOf(v, field, realNumber)
	if err != nil {
		return 0, err
	}
	if f > float64(math.MaxInt64)/float64(time.Second) {
		return 0, &FieldError{Field: field, Err: fmt.Errorf("rendered %v, too large", f)}
	}
	return time.Duration(f * float64(time.Second)), nil
}

// Resolve returns the frame spec with its templated fields rendered
// against scope and checked as the parser checks literals. A spec without
// templates is returned as it is.
func (f FrameSpec) Resolve(scope map[string]any) (FrameSpec, error) {
	if len(f.Templates) == 0 {
		return f, nil
	}
	out := f
	for _, key := range sortedTemplateKeys(f.Templates) {
		field := "loop.spec.frame." + key
		x, err := renderNumber(f.Templates[key], scope, field, frameNumbers[key])
		if err != nil {
			return f, err
		}
		switch key {
		case "max_rows":
			out.MaxRows = max(1, int(x))
		case "row_concurrency":
			out.RowConcurrency = max(1, int(x))
		case "max_bytes":
			out.MaxBytes = int64(x)
		case "max_attempts":
			out.MaxAttempts = max(1, int(x))
		case "lease_seconds":
			if x == 0 {
				x = DefaultFrameLeaseSeconds
			}
			out.LeaseSeconds = x
		case "heartbeat_seconds":
			out.HeartbeatSeconds = x
		case "max_seconds":
			out.MaxSeconds = x
		}
	}
	if f.leaseCap > 0 && out.LeaseSeconds > f.leaseCap {
		out.LeaseSeconds = f.leaseCap
	}
	if f.hbFromLease || out.HeartbeatSeconds == 0 {
		out.HeartbeatSeconds = out.LeaseSeconds / HeartbeatsPerLease
	}
	if out.HeartbeatSeconds >= out.LeaseSeconds {
		if f.leaseCap > 0 && out.HeartbeatSeconds >= f.leaseCap {
			return f, &FieldError{Field: "loop.spec.frame.heartbeat_seconds", Err: fmt.Errorf("%g must be less than cursor reclaim_after (%gs)", out.HeartbeatSeconds, f.leaseCap)}
		}
		return f, &FieldError{Field: "loop.spec.frame.heartbeat_seconds", Err: fmt.Errorf("%g must be less than lease_seconds (%g)", out.HeartbeatSeconds, out.LeaseSeconds)}
	}
	out.Templates = nil
	return out, nil
}

// ResolveLimits returns the loop's max_in_flight and chunk_size with
// their templates rendered against scope.
func (l *Loop) ResolveLimits(scope map[string]any) (maxInFlight, chunkSize int, err error) {
	maxInFlight, chunkSize = l.MaxInFlight, l.ChunkSize
	if t := l.Templates["max_in_flight"]; t != nil {
		x, err := renderNumber(t, scope, "loop.spec.max_in_flight", wholeNumber)
		if err != nil {
			return 0, 0, err
		}
		if x > MaxInFlight {
			return 0, 0, &FieldError{Field: "loop.spec.max_in_flight", Err: fmt.Errorf("rendered %v, more than %d", x, MaxInFlight)}
		}
		maxInFlight = int(x)
	}
	if t := l.Templates["chunk_size"]; t != nil {
		x, err := renderNumber(t, scope, "loop.spec.chunk_size", wholeNumber)
		if err != nil {
			return 0, 0, err
		}
		chunkSize = max(1, int(x))
	}
	return maxInFlight, chunkSize, nil
}

// ResolveTimeout returns the step's spec.timeout, rendering its template
// against scope.
func (s *StepSpec) ResolveTimeout(scope map[string]any) (time.Duration, error) {
	if s.TimeoutTemplate == nil {
		return s.Timeout, nil
	}
	return renderSeconds(s.TimeoutTemplate, scope, "spec.timeout")
}

// ResolveTimeout returns the task's spec.timeout, rendering its template
// against scope.
func (t *Task) ResolveTimeout(scope map[string]any) (time.Duration, error) {
	if t.TimeoutTemplate == nil {
		return t.Timeout, nil
	}
	return renderSeconds(t.TimeoutTemplate, scope, "spec.timeout")
}

// Resolve returns the action with attempts and delay rendered against
// scope when they are templates.
func (a Action) Resolve(scope map[string]any) (Action, error) {
	if len(a.Templates) == 0 {
		return a, nil
	}
	out := a
	if t := a.Templates["attempts"]; t != nil {
		x, err := renderNumber(t, scope, "then.attempts", wholeNumber)
		if err != nil {
			return a, err
		}
		out.Attempts = max(1, int(x))
	}
	if t := a.Templates["delay"]; t != nil {
		d, err := renderSeconds(t, scope, "then.delay")
		if err != nil {
			return a, err
		}
		out.Delay = d
	}
	out.Templates = nil
	return out, nil
}

// Resolve returns the rule with max_attempts and delay rendered against
// scope when they are templates.
func (r *RetryRule) Resolve(scope map[string]any) (*RetryRule, error) {
	if len(r.Templates) == 0 {
		return r, nil
	}
	out := *r
	if t := r.Templates["max_attempts"]; t != nil {
		x, err := renderNumber(t, scope, "retry.max_attempts", wholeNumber)
		if err != nil {
			return r, err
		}
		out.MaxAttempts = max(1, int(x))
	}
	if t := r.Templates["delay"]; t != nil {
		d, err := renderSeconds(t, scope, "retry.delay")
		if err != nil {
			return r, err
		}
		out.Delay = d
	}
	out.Templates = nil
	return &out, nil
}

func sortedTemplateKeys(m map[string]*Template) []string {
	return slices.Sorted(maps.Keys(m))
}
