package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/tools"
)

// retryVerdict is what a task's retry: block decides after an attempt.
type retryVerdict struct {
	// again: run the call once more (attempt+1) after delay.
	again bool
	// page: the attempt succeeded and the rule paginates: the next call
	// runs with nextCall overrides and this page's collect contribution.
	page     bool
	nextCall map[string]any
	// exhausted: a retry was wanted but max_attempts is reached.
	exhausted bool
	delay     time.Duration
	rule      *dsl.RetryRule
}

// retryOf returns the retry block that governs task: its own, else the
// step's.
func retryOf(step *dsl.Step, task *dsl.Task) *dsl.Retry {
	if task.Retry != nil {
		return task.Retry
	}
	return step.Retry
}

// retryScope is what retry conditions see: the task's view plus NoETL's
// retry variables (status_code, error, success, data, result, response,
// attempt, max_attempts); output.error is structured as in policy rules
// (see policyScope), error is its text.
func retryScope(view, out map[string]any, attempt, maxAttempts int) map[string]any {
	sc := make(map[string]any, len(view)+10)
	for k, v := range view {
		sc[k] = v
	}
	sc["output"], _ = structuredOutput(out)
	sc["data"] = out["data"]
	sc["result"] = out["data"]
	sc["response"] = responseBody(out)
	sc["error"] = out["error"]
	sc["success"] = out["status"] == tools.StatusSuccess
	sc["status_code"] = statusCode(out)
	sc["attempt"] = attempt
	sc["_attempt"] = attempt
	sc["max_attempts"] = maxAttempts
	return sc
}

// responseBody is the response an http call returned (output.data.data);
// for other tools their data.
func responseBody(out map[string]any) any {
	if d, ok := out["data"].(map[string]any); ok {
		if _, http := out["http"]; http {
			return d["data"]
		}
	}
	return out["data"]
}

func statusCode(out map[string]any) any {
	if h, ok := out["http"].(map[string]any); ok {
		return h["status"]
	}
	return nil
}

// decideRetry evaluates a retry block after attempt (1-based, counted per
// call) of page (1-based: pages gathered so far + 1) produced out. A
// paginating rule's max_attempts bounds the pages; any other rule's, the
// attempts at one call.
func decideRetry(r *dsl.Retry, view, out map[string]any, attempt, page int) (retryVerdict, error) {
	for _, raw := range r.Rules {
		rule, err := raw.Resolve(view)
		if err != nil {
			return retryVerdict{}, err
		}
		sc := retryScope(view, out, attempt, rule.MaxAttempts)
		sc["page"] = page
		match, err := ruleMatches(rule, sc, out)
		if err != nil || !match {
			if err != nil {
				return retryVerdict{}, err
			}
			continue
		}
		v := retryVerdict{rule: rule, delay: retryDelay(rule, attempt)}
		paging := (rule.NextCall != nil || rule.Collect != nil) && out["status"] == tools.StatusSuccess
		if paging && page >= rule.MaxAttempts || !paging && attempt >= rule.MaxAttempts {
			v.exhausted = true
			return v, nil
		}
		if paging {
			v.page = true
			if rule.NextCall != nil {
				next, err := dsl.RenderMap(rule.NextCall, sc)
				if err != nil {
					return retryVerdict{}, fmt.Errorf("next_call: %w", err)
				}
				v.nextCall = next
			}
			return v, nil
		}
		v.again = true
		return v, nil
	}
	return retryVerdict{}, nil
}

// ruleMatches reports whether a rule wants another attempt.
func ruleMatches(rule *dsl.RetryRule, sc, out map[string]any) (bool, error) {
	if rule.When != nil {
		return rule.When.Truthy(sc)
	}
	if rule.StopWhen != nil {
		stop, err := rule.StopWhen.Truthy(sc)
		if err != nil || stop {
			return false, err
		}
	}
	if rule.RetryWhen == nil && len(rule.OnStatus) == 0 && len(rule.On) == 0 {
		return out["status"] == tools.StatusError, nil
	}
	if rule.RetryWhen != nil {
		ok, err := rule.RetryWhen.Truthy(sc)
		if err != nil || ok {
			return ok, err
		}
	}
	if code, ok := statusInt(sc["status_code"]); ok && slices.Contains(rule.OnStatus, int64(code)) {
		return true, nil
	}
	for _, class := range rule.On {
		if errorClass(class, out) {
			return true, nil
		}
	}
	return false, nil
}

// errorClass reports whether a failed attempt belongs to a retry_on class.
func errorClass(class string, out map[string]any) bool {
	if out["status"] != tools.StatusError {
		return false
	}
	msg := strings.ToLower(fmt.Sprint(out["error"]))
	code, ok := statusInt(statusCode(out))
	if !ok {
		code = -1
	}
	kind, _ := httpErrorKind(code) // as policy rules see output.error.kind
	switch class {
	case "error":
		return true
	case "timeout":
		return strings.Contains(msg, "timeout") || strings.Contains(msg, "deadline exceeded") || strings.Contains(msg, "timed out") || kind == errKindTimeout || timedOut(out)
	case "connection_error":
		return code == 0 || strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection reset") ||
			strings.Contains(msg, "no such host") || strings.Contains(msg, "eof") || strings.Contains(msg, "broken pipe") ||
			strings.Contains(msg, "connect:") || retryableData(out)
	case "http_error":
		return code >= 400
	case "http_5xx":
		return code >= 500 && code < 600
	case "http_4xx":
		return code >= 400 && code < 500
	case "rate_limit":
		return kind == errKindRateLimit
	}
	return false
}

// retryableData reports a tool's own verdict that the failure is
// transient (postgres and nats set data.retryable).
func retryableData(out map[string]any) bool {
	d, ok := out["data"].(map[string]any)
	return ok && d["retryable"] == true
}

// retryDelay is the wait before attempt+1 under rule.
func retryDelay(rule *dsl.RetryRule, attempt int) time.Duration {
	d := backoffDelay(rule.Backoff, rule.Delay, attempt, rule.Multiplier, rule.MaxDelay)
	if rule.Jitter && d > 0 {
		d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	}
	return d
}

// collectPage returns what one page contributes under c: the value at
// c.Path in the response body.
func collectPage(c *dsl.Collect, out map[string]any) any {
	v := responseBody(out)
	if c == nil || c.Path == "" {
		return v
	}
	for _, part := range strings.Split(c.Path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// gather combines the pages' contributions under a strategy, in page order.
func gather(strategy string, pages []any) any {
	switch strategy {
	case dsl.CollectReplace:
		if len(pages) == 0 {
			return nil
		}
		return pages[len(pages)-1]
	case dsl.CollectCollect:
		return slices.Clone(pages)
	}
	out := []any{}
	for _, p := range pages {
		if l, ok := p.([]any); ok {
			out = append(out, l...)
		} else if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// withGathered returns the final page's output with the gathered value in
// place of its body: data.data for http (or at collect.into inside the
// result data), data otherwise.
func withGathered(out map[string]any, c *dsl.Collect, gathered any) map[string]any {
	res := copyMap(out)
	data, _ := out["data"].(map[string]any)
	switch {
	case c != nil && c.Into != "":
		d := overlay(data, nil)
		setPath(d, data, c.Into, gathered)
		res["data"] = d
	case out["http"] != nil && data != nil:
		d := overlay(data, nil)
		d["data"] = gathered
		res["data"] = d
	default:
		res["data"] = gathered
	}
	return res
}

// collectOf returns the collect spec of a retry block's paginating rule.
func collectOf(r *dsl.Retry) *dsl.Collect {
	for _, rule := range r.Rules {
		if rule.Collect != nil {
			return rule.Collect
		}
	}
	return nil
}
