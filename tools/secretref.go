package tools

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// A secret reference stands for a keychain secret inside rendered values:
// the secrets tool returns one instead of the secret, so step results and
// the event log only ever hold the reference. The worker reveals
// references in the configuration it hands a tool (RevealSecrets) and
// conceals them again in what the tool returns (ConcealSecrets).
var secretRefRE = regexp.MustCompile(`\$\{secret:([A-Za-z0-9_.\-/]+)(?:#([A-Za-z0-9_.\-]+))?\}`)

// SecretRef returns the reference to alias's secret: its URL, or the
// named field of the credential when field is not empty.
func SecretRef(alias, field string) string {
	if field != "" {
		return "${secret:" + alias + "#" + field + "}"
	}
	return "${secret:" + alias + "}"
}

// Revealed is one secret RevealSecrets put in place of its reference.
type Revealed struct {
	Ref    string
	Secret string
	// Credential is the keychain entry the secret came from: a tool that
	// sends the revealed configuration to a host checks it allows that
	// host (Credential.AllowsHost).
	Credential Credential
}

// RevealSecrets returns v (a plain value: maps, lists, strings, ...) with
// every secret reference inside its strings replaced by the secret,
// resolved through kc, and the secrets it revealed. v itself is not
// changed. A reference to an unknown alias or field is an error naming it
// (never a secret).
func RevealSecrets(ctx context.Context, kc Keychain, v any) (any, []Revealed, error) {
	var revealed []Revealed
	seen := map[string]string{}
	var walk func(x any) (any, error)
	walk = func(x any) (any, error) {
		switch t := x.(type) {
		case string:
			if !strings.Contains(t, "${secret:") {
				return t, nil
			}
			var err error
			out := secretRefRE.ReplaceAllStringFunc(t, func(ref string) string {
				if s, ok := seen[ref]; ok {
					return s
				}
				m := secretRefRE.FindStringSubmatch(ref)
				s, cred, rerr := resolveSecret(ctx, kc, m[1], m[2])
				if rerr != nil {
					if err == nil {
						err = rerr
					}
					return ref
				}
				seen[ref] = s
				revealed = append(revealed, Revealed{Ref: ref, Secret: s, Credential: cred})
				return s
			})
			return out, err
		case map[string]any:
			c := make(map[string]any, len(t))
			for k, e := range t {
				r, err := walk(e)
				if err != nil {
					return nil, err
				}
				c[k] = r
			}
			return c, nil
		case []any:
			c := make([]any, len(t))
			for i, e := range t {
				r, err := walk(e)
				if err != nil {
					return nil, err
				}
				c[i] = r
			}
			return c, nil
		}
		return x, nil
	}
	out, err := walk(v)
	if err != nil {
		return v, nil, err
	}
	return out, revealed, nil
}

// SecretTaker is implemented by a tool that may receive secrets revealed
// from the secret references in its configuration: one that sends a
// secret no further than its keychain entry allows (http, nats: see
// Credential.AllowsHost, DisallowedSecret), or one that runs code with the worker's rights
// anyway and is therefore opt-in (python, shell, duckdb). The engine
// refuses a secret reference in the configuration of any other tool
// (ErrSecretNotTaken): what such a tool returns becomes the playbook's
// result and events, and the secret, or anything the playbook computes
// from it (reversed, encoded), would come back with it — a postgres
// command can SELECT it, a noop echoes it, a sub-playbook records it. The
// step's args reach such a tool with their references unrevealed.
type SecretTaker interface {
	// TakesSecrets reports whether the tool may receive revealed secrets.
	TakesSecrets() bool
}

// TakesSecrets reports whether t may receive revealed secrets: it
// implements SecretTaker and says so.
func TakesSecrets(t Tool) bool {
	st, ok := t.(SecretTaker)
	return ok && st.TakesSecrets()
}

// DisallowedSecret returns the first of revealed whose keychain entry
// does not allow host (Credential.AllowsHost), if any: a tool that takes
// secrets checks every host it sends a configuration to with it.
func DisallowedSecret(revealed []Revealed, host string) (Revealed, bool) {
	for _, r := range revealed {
		if !r.Credential.AllowsHost(host) {
			return r, true
		}
	}
	return Revealed{}, false
}

// ErrSecretNotTaken is the error of a task whose configuration holds a
// secret reference while its tool does not take secrets (SecretTaker).
var ErrSecretNotTaken = errors.New("tools: this tool kind does not take secrets")

// HoldsSecretRef reports whether v (a plain value, as RevealSecrets takes)
// holds a secret reference RevealSecrets would resolve: when it does not,
// RevealSecrets would give back a copy of v and reveal nothing.
func HoldsSecretRef(v any) bool {
	switch t := v.(type) {
	case string:
		return strings.Contains(t, "${secret:")
	case map[string]any:
		for _, e := range t {
			if HoldsSecretRef(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if HoldsSecretRef(e) {
				return true
			}
		}
	}
	return false
}

func resolveSecret(ctx context.Context, kc Keychain, alias, field string) (string, Credential, error) {
	if kc == nil {
		return "", Credential{}, fmt.Errorf("secret %q: no keychain configured: %w", alias, ErrCredentialNotFound)
	}
	c, err := kc.Resolve(ctx, alias)
	if err != nil {
		return "", Credential{}, fmt.Errorf("secret: %w", err)
	}
	if c.Alias == "" {
		c.Alias = alias
	}
	if field == "" {
		if c.URL == "" {
			return "", Credential{}, fmt.Errorf("secret %q: the credential has no value (name a field)", alias)
		}
		return c.URL, c, nil
	}
	s, ok := c.Fields[field]
	if !ok {
		return "", Credential{}, fmt.Errorf("secret %q: the credential has no field %q", alias, field)
	}
	return s, c, nil
}

// ConcealSecrets returns v with every revealed secret inside its strings
// replaced by its reference again, so a tool's output that echoes a secret
// records only the reference.
func ConcealSecrets(v any, revealed []Revealed) any {
	if len(revealed) == 0 {
		return v
	}
	var swaps []string // form, reference, ... for strings.Replacer
	for _, r := range revealed {
		if r.Secret == "" {
			continue
		}
		// Escaped forms first: they are longer than the secret, and the
		// replacer tries its pairs in order.
		forms := urlForms(r.Secret)
		for i := len(forms) - 1; i >= 0; i-- {
			swaps = append(swaps, forms[i], r.Ref)
		}
	}
	if len(swaps) == 0 {
		return v
	}
	return conceal(v, strings.NewReplacer(swaps...), 0)
}

// maxConcealDepth bounds conceal's descent: a value nested deeper (a
// cycle, which a host function can return) is left as it is, for the
// engine's encoding to refuse.
const maxConcealDepth = 10000

func conceal(v any, swap *strings.Replacer, depth int) any {
	if depth > maxConcealDepth {
		return v
	}
	switch t := v.(type) {
	case string:
		return swap.Replace(t)
	case map[string]any:
		c := make(map[string]any, len(t))
		for k, e := range t {
			c[k] = conceal(e, swap, depth+1)
		}
		return c
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = conceal(e, swap, depth+1)
		}
		return c
	}
	return v
}
