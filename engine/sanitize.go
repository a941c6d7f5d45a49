package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/cursorflow/cursorflow/eventlog"
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
	// redact is what creds hold to redact, worked out when a credential
	// is added rather than for every report.
	redact tools.Secrets
	// kc is the recordingKeychain Worker.keychain last made over this
	// record, for the worker kcOf: made once for the command, not for
	// every task the command runs.
	kc   *recordingKeychain
	kcOf *Worker
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
	s.redact = tools.SecretsOf(s.creds...)
}

// secrets returns what the recorded credentials hold to redact.
func (s *secretsSeen) secrets() tools.Secrets {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.redact
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
func (k *recordingKeychain) Resolve(ctx context.Context, alias string) (tools.Credential, error) {
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
	// A worker's fields do not change while it runs a command, so the
	// keychain made for it holds for the rest of the command.
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if seen.kcOf != w {
		seen.kc, seen.kcOf = &recordingKeychain{inner: w.Keychain, seen: seen}, w
	}
	return seen.kc
}

// reportJSON encodes a report's payload as encodeReport does, recording
// one it cannot encode as an encode error (mustJSON). Worker.event turns
// such a report into a failure instead.
func reportJSON(ctx context.Context, payload any) json.RawMessage {
	b, err := encodeReport(ctx, payload)
	if err != nil {
		return mustJSON(map[string]string{"encode_error": err.Error()})
	}
	return b
}

// encodeReport encodes a report's payload with its error messages bounded
// and the secrets the command's tools resolved redacted. A payload that
// holds none of them is encoded once and kept as it is. A payload JSON
// cannot encode (see encodeJSON) is an error.
func encodeReport(ctx context.Context, payload any) (json.RawMessage, error) {
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
	b, err := encodeJSON(payload)
	if err != nil {
		return nil, err
	}
	seen, ok := ctx.Value(secretsKey{}).(*secretsSeen)
	if !ok {
		return b, nil
	}
	secrets := seen.secrets()
	if secrets.Empty() || !secrets.InJSON(b) {
		return b, nil
	}
	// b was just encoded, so it decodes; were it not to, it is kept as
	// it was, as it always has been.
	var v any
	if unmarshal(b, &v) == nil {
		b = mustJSON(secrets.RedactValue(v))
	}
	return b, nil
}

// rowError is a failed row's error as its source gets it (cursor.Row.Error
// on Release): bounded and redacted as the frame's report is
// (encodeReport), so the source never holds a secret the log would not.
func rowError(ctx context.Context, msg string) string {
	msg = boundText(msg, MaxErrorBytes)
	seen, ok := ctx.Value(secretsKey{}).(*secretsSeen)
	if !ok {
		return msg
	}
	if s, ok := seen.secrets().RedactValue(msg).(string); ok {
		msg = s
	}
	return msg
}

// unrecordable turns a report whose payload cannot be encoded (err) into
// one that says so: a command's result into the command's failure, as an
// oversized one is (limitResult), and a frame's ctx assignments into the
// frame's failure. Dropping what the command returned and going on would
// complete a step whose result the log never held. Other reports are
// kept, to be recorded with an encode error.
func unrecordable(typ string, payload any, err error) (string, any) {
	switch p := payload.(type) {
	case completedPayload:
		if typ == eventlog.TypeCommandCompleted || typ == eventlog.TypeCommandFailed {
			return eventlog.TypeCommandFailed, completedPayload{
				Error: fmt.Sprintf("the step's result cannot be recorded: %v", err), Field: "result", Ms: p.Ms}
		}
	case frameDonePayload:
		p.Ctx = nil
		if p.Fail == "" {
			p.Fail = fmt.Sprintf("the frame's ctx assignments cannot be recorded: %v", err)
		}
		return typ, p
	}
	return typ, payload
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
