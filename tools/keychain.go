package tools

import "context"

// Credential is a resolved keychain alias. Its String method never prints
// the secret.
type Credential struct {
	Alias string
	// URL is the connection URL or DSN (postgres://..., mysql DSN, ...).
	URL string
	// Fields holds any other fields (token, username, ...).
	Fields map[string]string
}

// String names the alias only, so a Credential in a log line leaks nothing.
func (c Credential) String() string { return "credential(" + c.Alias + ")" }

// Keychain resolves credential aliases on the worker. Secrets stay on the
// worker: they never enter commands, events or logs.
type Keychain interface {
	// Resolve returns the credential for alias, or an error wrapping
	// ErrCredentialNotFound that names the alias.
	Resolve(ctx context.Context, alias string) (Credential, error)
}
