package engine

import (
	"math"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
)

// maxBackoff caps a single retry delay.
const maxBackoff = 5 * time.Minute

// matchRule returns the first rule of p whose when holds against scope
// (an else rule always holds), or nil when none matches or p is nil.
func matchRule(p *dsl.Policy, scope map[string]any) (*dsl.Rule, error) {
	if p == nil {
		return nil, nil
	}
	for _, r := range p.Rules {
		if r.Else || r.When == nil {
			return r, nil
		}
		ok, err := r.When.Truthy(scope)
		if err != nil {
			return nil, err
		}
		if ok {
			return r, nil
		}
	}
	return nil, nil
}

// backoff returns the delay before retry number attempt (1 = the first
// retry) under action a.
func backoff(a *dsl.Action, attempt int) time.Duration {
	return backoffDelay(a.Backoff, a.Delay, attempt, 2, maxBackoff)
}

// backoffDelay is the wait before retry number attempt under a backoff
// kind: none, fixed (base), linear (base × attempt) or exponential (base ×
// multiplier^(attempt-1)), capped at limit.
func backoffDelay(kind string, base time.Duration, attempt int, multiplier float64, limit time.Duration) time.Duration {
	var d time.Duration
	switch kind {
	case dsl.BackoffNone:
		return 0
	case dsl.BackoffLinear:
		d = base * time.Duration(attempt)
	case dsl.BackoffExponential:
		d = time.Duration(float64(base) * math.Pow(multiplier, float64(attempt-1)))
	default: // fixed, or unset with a delay
		d = base
	}
	if d > limit || d < 0 {
		d = limit
	}
	return d
}

// retryAttempts is the total number of attempts a retry action allows.
func retryAttempts(a *dsl.Action) int {
	if a.Attempts > 0 {
		return a.Attempts
	}
	return 3
}

// errorValue is output.error as a policy rule's when sees it, the way
// NoETL's playbooks test it: output.error.kind, .retryable, .status (the
// HTTP status), .code (a SQLSTATE) and .message. Printed, it is the
// error's text, as output.error is everywhere else.
type errorValue map[string]any

// String returns the error's text.
func (e errorValue) String() string {
	s, _ := e["message"].(string)
	return s
}

// Kinds of errorValue: what failed, for rules to tell apart.
const (
	errKindRateLimit   = "rate_limit"   // HTTP 429
	errKindAuth        = "auth"         // HTTP 401, 403
	errKindNotFound    = "not_found"    // HTTP 404
	errKindTimeout     = "timeout"      // HTTP 408, 504, or out of time (see timedOut)
	errKindServerError = "server_error" // other HTTP 5xx
	errKindClientError = "client_error" // other HTTP 4xx
	errKindError       = "error"        // anything else
)

// policyScope is view for a policy rule's when: when the task failed, its
// output.error (and NoETL v10's outcome.error) is an errorValue. A
// successful output leaves view as it is.
func policyScope(view, out map[string]any) map[string]any {
	o, failed := structuredOutput(out)
	if !failed {
		return view
	}
	sc := copyMap(view)
	sc["output"], sc["outcome"] = o, o
	return sc
}

// structuredOutput returns a failed task's output with its error as an
// errorValue, and whether it failed (out itself when it did not).
func structuredOutput(out map[string]any) (map[string]any, bool) {
	msg, failed := out["error"].(string)
	if !failed {
		return out, false
	}
	ev := errorValue{"message": msg, "kind": errKindError, "retryable": retryableData(out)}
	if d, ok := out["data"].(map[string]any); ok && d["sqlstate"] != nil {
		ev["code"] = d["sqlstate"]
	}
	if code, ok := statusInt(statusCode(out)); ok {
		ev["status"] = code
		if code >= 400 {
			ev["kind"], ev["retryable"] = httpErrorKind(code)
		}
		// Below 400 the status is not the failure (no response, status 0;
		// a 200 whose body was cut short): the tool's data.retryable says
		// whether sending it again may help.
	}
	if timedOut(out) {
		ev["kind"], ev["retryable"] = errKindTimeout, true
	}
	o := copyMap(out)
	o["error"] = ev
	return o, true
}

// timedOut reports whether a failed call ran out of time without a status
// to say so: the tool says it did (an http call's output.http.timeout, a
// postgres statement's data.timeout), or the step's or task's
// spec.timeout cut the call (runTask names that deadline first in the
// error). Its verdict is the worker's, made where the outcome is judged:
// the decision it leads to is recorded, never made again from the log.
func timedOut(out map[string]any) bool {
	if h, ok := out["http"].(map[string]any); ok && h["timeout"] == true {
		return true
	}
	if d, ok := out["data"].(map[string]any); ok && d["timeout"] == true {
		return true
	}
	msg, _ := out["error"].(string)
	return strings.HasPrefix(msg, timeoutReachedPrefix)
}

// httpErrorKind classifies an HTTP error status, and says whether the
// same request may succeed later.
func httpErrorKind(code int) (kind string, retryable bool) {
	switch {
	case code == 429:
		return errKindRateLimit, true
	case code == 401 || code == 403:
		return errKindAuth, false
	case code == 404:
		return errKindNotFound, false
	case code == 408 || code == 504:
		return errKindTimeout, true
	case code >= 500:
		return errKindServerError, true
	case code >= 400:
		return errKindClientError, false
	}
	return errKindError, false
}

// statusInt reads an HTTP status as an int, however it was decoded.
func statusInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		return int(x), x == math.Trunc(x)
	}
	return 0, false
}
