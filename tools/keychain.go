package tools

import (
	"context"
	"net"
	"net/url"
	"strings"
)

// Credential is a resolved keychain alias. Its String method never prints
// the secret.
type Credential struct {
	Alias string
	// URL is the connection URL or DSN (postgres://..., mysql DSN, ...).
	URL string
	// Fields holds any other fields (token, username, ...).
	Fields map[string]string
	// Hosts lists where a tool that sends the credential to a host it is
	// told (the http tool) may send it: "api.example.com" (any port),
	// "api.example.com:8443", "*.example.com" (any subdomain, not the
	// apex), or "*" (anywhere: only for a keychain no stranger's playbook
	// can name). Empty means the host of URL when URL has one, else no
	// host at all. See AllowsHost.
	Hosts []string
}

// String names the alias only, so a Credential in a log line leaks nothing.
func (c Credential) String() string { return "credential(" + c.Alias + ")" }

// AllowsHost reports whether c may be sent to host (a URL's Host: name or
// name:port). It follows Hosts, or when Hosts is empty the host of URL;
// a credential with neither is sent nowhere. Names compare
// case-insensitively.
func (c Credential) AllowsHost(host string) bool {
	patterns := c.Hosts
	if len(patterns) == 0 {
		u, err := url.Parse(c.URL)
		if err != nil || u.Host == "" {
			return false
		}
		patterns = []string{u.Host}
	}
	name, port := splitHostPort(host)
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "*" {
			return true
		}
		pn, pp := splitHostPort(p)
		if pp != "" && pp != port {
			continue
		}
		if suffix, ok := strings.CutPrefix(pn, "*."); ok {
			if strings.HasSuffix(name, "."+suffix) {
				return true
			}
			continue
		}
		if pn == name {
			return true
		}
	}
	return false
}

// splitHostPort splits "name:port", "[v6]:port", "name" or "[v6]" into a
// lower-cased name (without brackets) and a port ("" if none).
func splitHostPort(host string) (name, port string) {
	host = strings.ToLower(host)
	if h, p, err := net.SplitHostPort(host); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ""
}

// Keychain resolves credential aliases on the worker. Secrets stay on the
// worker: they never enter commands, events or logs.
type Keychain interface {
	// Resolve returns the credential for alias, or an error wrapping
	// ErrCredentialNotFound that names the alias.
	Resolve(ctx context.Context, alias string) (Credential, error)
}
