package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/cursorflow/cursorflow/tools"
)

// MaxErrorBytes bounds an error message a worker reports; a longer one is
// cut, saying how long it was. Errors are diagnostics: the log keeps their
// start, not a whole response body or stack.
const MaxErrorBytes = 8 << 10

// Reports are sanitized before they leave the worker: the secrets of every
// credential a command's tools resolved are redacted from the report and
// its partial results (tools redact what they know; this catches the rest,
// such as a secret a script printed), and error messages are bounded.

// secretsSeen records the credentials a command's tools resolved.
type secretsSeen struct {
	mu    sync.Mutex
	creds []tools.Credential
}

func (s *secretsSeen) add(c tools.Credential) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.creds {
		if x.Alias == c.Alias && x.URL == c.URL {
			return
		}
	}
	s.creds = append(s.creds, c)
}

func (s *secretsSeen) list() []tools.Credential {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]tools.Credential(nil), s.creds...)
}

type secretsKey struct{}

// withSecrets gives a command's context a record of the credentials its
// tools resolve (keeping one that is already there).
func withSecrets(ctx context.Context) context.Context {
	if _, ok := ctx.Value(secretsKey{}).(*secretsSeen); ok {
		return ctx
	}
	return context.WithValue(ctx, secretsKey{}, &secretsSeen{})
}

// recordingKeychain resolves through a keychain and records what it
// resolved.
type recordingKeychain struct {
	inner tools.Keychain
	seen  *secretsSeen
}

// Resolve implements tools.Keychain.
func (k recordingKeychain) Resolve(ctx context.Context, alias string) (tools.Credential, error) {
	c, err := k.inner.Resolve(ctx, alias)
	if err == nil {
		k.seen.add(c)
	}
	return c, err
}

// keychain returns the worker's keychain, recording what it resolves for
// the command running under ctx.
func (w *Worker) keychain(ctx context.Context) tools.Keychain {
	seen, ok := ctx.Value(secretsKey{}).(*secretsSeen)
	if !ok || w.Keychain == nil {
		return w.Keychain
	}
	return recordingKeychain{inner: w.Keychain, seen: seen}
}

// reportJSON encodes a report's payload with its error messages bounded
// and the secrets the command's tools resolved redacted. A payload that
// holds none of them is encoded once and kept as it is.
func reportJSON(ctx context.Context, payload any) json.RawMessage {
	switch p := payload.(type) {
	case completedPayload:
		p.Error = boundText(p.Error, MaxErrorBytes)
		payload = p
	case frameDonePayload:
		p.Fail = boundText(p.Fail, MaxErrorBytes)
		for i := range p.Items {
			p.Items[i].Error = boundText(p.Items[i].Error, MaxErrorBytes)
		}
		payload = p
	}
	b := mustJSON(payload)
	seen, ok := ctx.Value(secretsKey{}).(*secretsSeen)
	if !ok {
		return b
	}
	creds := seen.list()
	if len(creds) == 0 || !tools.JSONHoldsSecret(b, creds...) {
		return b
	}
	var v any
	if err := unmarshal(b, &v); err != nil {
		return b
	}
	return mustJSON(tools.RedactValue(v, creds...))
}

// boundText cuts s to max bytes (on a rune boundary), saying how long it
// was.
func boundText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (truncated: %d bytes in all)", s[:cut], len(s))
}
