// Package secrets is cursorflow's secrets tool, NoETL's `kind: secrets`
// task read through the host's keychain: the secret never leaves the
// worker.
//
// Task configuration:
//
//	secret_name | name | key   the keychain alias holding the secret
//	field                      a field of the credential instead of its
//	                           URL (token, password, ...)
//	provider                   keychain (the default; also env, host).
//	                           Cloud providers are the host keychain's
//	                           business: name the alias it serves.
//	version                    latest (the only version a keychain has)
//
// Data is {secret_value, version, provider}, as NoETL returns it, except
// that secret_value is a reference (tools.SecretRef, "${secret:alias}")
// and not the secret: step results, the event log and logs only ever hold
// the reference. When a later step's configuration renders the reference
// ({{ get_token.secret_value }} in an http header, a python input), the
// worker replaces it with the secret just before calling that tool, and
// replaces the secret with the reference again in whatever the tool
// returns. Only tools that take secrets (tools.SecretTaker: http and nats,
// and the opt-in python, shell and duckdb) get it revealed; a postgres command, a
// noop or a sub-playbook that names one fails instead, since what they
// return comes back to the playbook with the secret, or anything computed
// from it, inside. The call checks that the alias resolves, so a missing secret
// fails here, naming the alias. The http and nats tools send a revealed
// secret only to the hosts its keychain entry allows
// (tools.Credential.AllowsHost), as they do an auth credential.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/internal/conv"
)

// ErrBadConfig is wrapped by the errors Execute returns for a task that
// names no secret or an unsupported provider.
var ErrBadConfig = errors.New("secrets: bad task configuration")

// Tool is the secrets tool. The zero value resolves through the call's
// keychain only.
type Tool struct {
	// Keychain resolves aliases when a Call carries no Keychain.
	Keychain tools.Keychain
}

// New returns the secrets tool with a fallback keychain (may be nil).
func New(kc tools.Keychain) *Tool { return &Tool{Keychain: kc} }

// ConfigKeys implements tools.ConfigKeyLister: the keys of the package doc,
// and auth (or credential) naming the alias when secret_name is absent.
func (t *Tool) ConfigKeys() []string {
	return []string{"secret_name", "name", "key", "field", "provider", "version", "auth", "credential", "credentials"}
}

// Execute checks that the secret resolves and returns its reference.
func (t *Tool) Execute(ctx context.Context, call *tools.Call) (tools.Output, error) {
	alias, _ := conv.String(call.Config, "secret_name", "name", "key")
	if alias == "" {
		if a, ok := conv.Alias(call.Config); ok {
			alias = a
		}
	}
	if alias == "" {
		return tools.Output{}, fmt.Errorf("%w: secret_name (the keychain alias) is required", ErrBadConfig)
	}
	provider, _ := conv.String(call.Config, "provider")
	switch strings.ToLower(provider) {
	case "", "keychain", "env", "host":
	default:
		return tools.Output{}, fmt.Errorf("%w: provider %q: secrets are read through the host's keychain (provider keychain); configure the host keychain to serve alias %q", ErrBadConfig, provider, alias)
	}
	if v, _ := conv.String(call.Config, "version"); v != "" && v != "latest" {
		return tools.Output{}, fmt.Errorf("%w: version %q: a keychain holds only the latest version", ErrBadConfig, v)
	}
	field, _ := conv.String(call.Config, "field")
	kc := call.Keychain
	if kc == nil {
		kc = t.Keychain
	}
	ref := tools.SecretRef(alias, field)
	if _, _, err := tools.RevealSecrets(ctx, kc, ref); err != nil {
		return tools.Output{}, fmt.Errorf("secrets: %w", err)
	}
	return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{
		"secret_value": ref, "version": "latest", "provider": "keychain",
	}}, nil
}
