package dsl

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Retry defaults of the mapping form.
const (
	// DefaultRetryMultiplier is the exponential backoff factor.
	DefaultRetryMultiplier = 2.0
	// DefaultRetryMaxDelaySeconds caps one delay.
	DefaultRetryMaxDelaySeconds = 60
)

// RetryOn error classes (retry_on: [...]).
var retryOnClasses = []string{"error", "timeout", "connection_error", "http_error", "http_5xx", "http_4xx", "rate_limit"}

// retry decodes a retry: block: true, a number of attempts, NoETL's
// mapping form, or the design's list of when/then rules.
func (d *decoder) retry(n *yaml.Node, what string) *Retry {
	n = d.resolve(n)
	if d.isNull(n) {
		return nil
	}
	r := &Retry{Pos: d.pos(n)}
	switch n.Kind {
	case yaml.ScalarNode:
		switch v := d.plain(n).(type) {
		case bool:
			if !v {
				return nil
			}
			r.Rules = []*RetryRule{d.retryDefaults(&RetryRule{Pos: r.Pos})}
		case int64:
			if v < 1 {
				d.errorf(n, "%s: attempts must be at least 1, got %d", what, v)
				return nil
			}
			r.Rules = []*RetryRule{d.retryDefaults(&RetryRule{MaxAttempts: int(min(v, math.MaxInt32)), Pos: r.Pos})}
		default:
			if t, ok := d.templated(n, what); ok {
				rule := &RetryRule{Pos: r.Pos}
				putTemplate(&rule.Templates, "max_attempts", t)
				r.Rules = []*RetryRule{d.retryDefaults(rule)}
				break
			}
			d.errorf(n, "%s must be true, a number of attempts, a mapping or a list of rules, got %s", what, describe(n))
			return nil
		}
	case yaml.MappingNode:
		rule := &RetryRule{Pos: r.Pos}
		ps, _ := d.mapping(n, what)
		for _, p := range ps {
			if !d.retryKey(rule, p, what, false) {
				d.unknown(p.k, what, p.key)
			}
		}
		r.Rules = []*RetryRule{d.retryDefaults(rule)}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			w := fmt.Sprintf("%s[%d]", what, i)
			item = d.resolve(item)
			ps, ok := d.mapping(item, w)
			if !ok || item == nil {
				continue
			}
			rule := &RetryRule{Pos: d.pos(item)}
			for _, p := range ps {
				switch p.key {
				case "when":
					rule.When = d.template(p.v, w+".when")
				case "then":
					tps, _ := d.mapping(p.v, w+".then")
					for _, tp := range tps {
						if !d.retryKey(rule, tp, w+".then", true) {
							d.unknown(tp.k, w+".then", tp.key)
						}
					}
				default:
					d.unknown(p.k, w, p.key)
				}
			}
			if rule.When == nil {
				d.errorAt(rule.Pos, "%s: a retry rule needs when", w)
			}
			r.Rules = append(r.Rules, d.retryDefaults(rule))
		}
		if len(r.Rules) == 0 {
			return nil
		}
	default:
		d.errorf(n, "%s must be true, a number, a mapping or a list, got %s", what, kindName(n))
		return nil
	}
	return r
}

// retryKey decodes one key of a retry mapping (or of a list rule's then);
// false means the key is unknown.
func (d *decoder) retryKey(rule *RetryRule, p pair, what string, listForm bool) bool {
	w := what + "." + p.key
	switch p.key {
	case "max_attempts", "attempts":
		if t, ok := d.templated(p.v, w); ok {
			putTemplate(&rule.Templates, "max_attempts", t)
			return true
		}
		v, ok := d.nonNegInt(p.v, w)
		if ok && v == 0 {
			d.errorf(p.v, "%s must be at least 1", w)
		}
		rule.MaxAttempts = int(min(v, math.MaxInt32))
	case "retry_when":
		rule.RetryWhen = d.template(p.v, w)
	case "stop_when":
		rule.StopWhen = d.template(p.v, w)
	case "retry_on_status":
		items, _ := d.list(p.v, w)
		for _, it := range items {
			v, ok := d.nonNegInt(it, w+"[]")
			if ok {
				rule.OnStatus = append(rule.OnStatus, v)
			}
		}
	case "retry_on":
		items, _ := d.list(p.v, w)
		for _, it := range items {
			c, _ := d.str(it, w+"[]")
			c = strings.ToLower(c)
			if !slices.Contains(retryOnClasses, c) {
				d.errorf(it, "%s: unknown error class %q (want one of %s)", w, c, strings.Join(retryOnClasses, ", "))
				continue
			}
			rule.On = append(rule.On, c)
		}
	case "backoff":
		b, _ := d.str(p.v, w)
		if b == "constant" {
			b = BackoffFixed
		}
		if b != "" && !slices.Contains(backoffKinds, b) {
			d.errorf(p.v, "%s: bad backoff %q (want none, fixed, linear or exponential)", what, b)
		}
		rule.Backoff = b
	case "initial_delay", "delay", "backoff_seconds":
		if t, ok := d.templated(p.v, w); ok {
			putTemplate(&rule.Templates, "delay", t)
			return true
		}
		rule.Delay, _ = d.seconds(p.v, w)
	case "backoff_multiplier":
		rule.Multiplier, _ = d.nonNegFloat(p.v, w)
	case "max_delay":
		rule.MaxDelay, _ = d.seconds(p.v, w)
	case "jitter":
		b, ok := d.plain(p.v).(bool)
		if !ok {
			d.errorf(p.v, "%s must be true or false", w)
		}
		rule.Jitter = b
	case "next_call":
		if !listForm {
			return false
		}
		rule.NextCall = d.valueMap(p.v, w)
	case "collect":
		if !listForm {
			return false
		}
		rule.Collect = d.collect(p.v, w)
	case "sink":
		if !listForm {
			return false
		}
		rule.Sink = d.sink(p.v, w)
	default:
		return false
	}
	return true
}

// retryDefaults fills a rule's defaults.
func (d *decoder) retryDefaults(r *RetryRule) *RetryRule {
	if r.MaxAttempts == 0 && r.Templates["max_attempts"] == nil {
		if r.NextCall != nil || r.Collect != nil {
			r.MaxAttempts = DefaultPageAttempts
		} else {
			r.MaxAttempts = DefaultRetryAttempts
		}
	}
	if r.Multiplier == 0 {
		r.Multiplier = DefaultRetryMultiplier
	}
	if r.MaxDelay == 0 {
		r.MaxDelay = DefaultRetryMaxDelaySeconds * time.Second
	}
	if r.Backoff == "" {
		r.Backoff = defaultBackoff(r.Delay > 0 || r.Templates["delay"] != nil, BackoffExponential)
	}
	return r
}

func (d *decoder) collect(n *yaml.Node, what string) *Collect {
	n = d.resolve(n)
	c := &Collect{Strategy: CollectAppend, Pos: d.pos(n)}
	if n != nil && n.Kind == yaml.ScalarNode && !d.isNull(n) {
		c.Strategy = n.Value
	} else {
		ps, _ := d.mapping(n, what)
		for _, p := range ps {
			switch p.key {
			case "strategy", "mode":
				c.Strategy, _ = d.str(p.v, what+"."+p.key)
			case "path":
				c.Path, _ = d.str(p.v, what+".path")
			case "into":
				c.Into, _ = d.str(p.v, what+".into")
			default:
				d.unknown(p.k, what, p.key)
			}
		}
	}
	switch c.Strategy {
	case CollectAppend, CollectReplace, CollectCollect:
	default:
		d.errorf(n, "%s: bad strategy %q (want append, replace or collect)", what, c.Strategy)
	}
	return c
}

// sink decodes a sink block: {tool: KIND or {kind, ...}, ...the tool's
// fields}. The saving tool runs after the work succeeded, in the same
// command.
func (d *decoder) sink(n *yaml.Node, what string) *Sink {
	n = d.resolve(n)
	if d.isNull(n) {
		return nil
	}
	ps, ok := d.mapping(n, what)
	if !ok {
		return nil
	}
	s := &Sink{Pos: d.pos(n)}
	t := &Task{Pos: s.Pos}
	for _, p := range ps {
		switch p.key {
		case "tool", "kind":
			tn := d.resolve(p.v)
			if tn != nil && tn.Kind == yaml.MappingNode {
				inner := d.task(tn, what+".tool", what+": ", false)
				if inner != nil {
					t.Kind = inner.Kind
					for k, v := range inner.Config {
						if _, set := t.Config[k]; !set {
							t.setConfig(k, v, inner.KeyPos[k])
						}
					}
					t.Policy, t.Timeout, t.TimeoutTemplate = inner.Policy, inner.Timeout, inner.TimeoutTemplate
				}
				continue
			}
			t.Kind, _ = d.str(p.v, what+"."+p.key)
		default:
			t.setConfig(p.key, d.valueOf(p.v, what+"."+p.key), d.pos(p.k))
		}
	}
	if t.Kind == "" {
		d.errorf(n, "%s: tool is required (the kind that saves the result)", what)
		return nil
	}
	if t.Kind == "workbook" {
		d.errorf(n, "%s: a sink's tool cannot be a workbook call", what)
		return nil
	}
	s.Task = t
	return s
}
