package engine

import (
	"math"
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
