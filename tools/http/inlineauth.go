package http

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/internal/conv"
)

// NoETL's auth block names a credential (auth: alias, auth: {type, credential:
// alias}, auth: {alias: {type, ...}}) or carries it inline:
//
//	auth: {type: bearer, token: '{{ secret }}'}
//	auth: {type: basic, username: u, password: '{{ secret }}'}
//	auth: {type: api_key, value: '{{ secret }}', header_name: X-Api-Key}
//
// The inline forms build the credential from the block itself; a block
// that is neither form is refused rather than sending no credential.

// authSpec returns the auth block's spec mapping: cfg's auth itself, or
// the one spec of the named form {alias: {type, ...}} with its name.
func authSpec(cfg map[string]any) (spec map[string]any, name string) {
	m, ok := cfg["auth"].(map[string]any)
	if !ok {
		return nil, ""
	}
	if _, typed := m["type"]; !typed && len(m) == 1 {
		for k, v := range m {
			if inner, ok := v.(map[string]any); ok {
				return inner, k
			}
		}
	}
	return m, ""
}

// inlineAuth returns the credential an inline auth block carries; false
// when the block names a keychain credential (or there is none).
func inlineAuth(cfg map[string]any) (tools.Credential, bool, error) {
	spec, name := authSpec(cfg)
	if spec == nil {
		return tools.Credential{}, false, nil
	}
	str := func(keys ...string) string {
		s, _ := conv.String(spec, keys...)
		return s
	}
	typ := strings.ToLower(str("type"))
	alias := name
	if alias == "" {
		alias = "inline " + typ + " auth"
	}
	c := tools.Credential{Alias: alias, Fields: map[string]string{}}
	switch typ {
	case "bearer", "token", "oauth2":
		if tok := str("token", "access_token"); tok != "" {
			c.Fields["token"] = tok
			return c, true, nil
		}
	case "basic":
		if u, p := str("username", "user"), str("password"); u != "" || p != "" {
			c.Fields["username"], c.Fields["password"] = u, p
			return c, true, nil
		}
	case "api_key", "apikey", "header":
		if v := str("value", "api_key", "token"); v != "" {
			c.Fields["api_key"] = v
			c.Fields["header_name"] = str("header_name", "header")
			return c, true, nil
		}
	}
	return tools.Credential{}, false, nil
}

// headerNameOf returns the header an auth block of type api_key names for
// its keychain credential (the block's header_name wins over the
// credential's own), or "".
func headerNameOf(cfg map[string]any) string {
	spec, _ := authSpec(cfg)
	if spec == nil {
		return ""
	}
	s, _ := conv.String(spec, "header_name", "header")
	return s
}

// errAuthForm refuses an auth block that neither names a credential nor
// carries one.
func errAuthForm(v any) error {
	return fmt.Errorf("%w: auth %s names no keychain credential and carries none: want an alias, {type, credential: alias}, "+
		"or inline {type: bearer, token}, {type: basic, username, password}, {type: api_key, value, header_name}", ErrBadConfig, describeAuth(v))
}

// describeAuth names an auth block's keys, never its values (a token).
func describeAuth(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprintf("(%T)", v)
	}
	return "with keys " + strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}
