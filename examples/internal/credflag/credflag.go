// Package credflag reads the --credential flag the example binaries (the
// cursorflow CLI and the worker) share: alias=URL, or alias={"url": ...,
// "hosts": [...], ...} as in CURSORFLOW_CREDENTIAL_<ALIAS> (see
// tools.ParseCredential).
//
// A value is a secret: the errors here never quote it, nor any part of it
// but an alias that is a plain name.
package credflag

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cursorflow/cursorflow/tools"
)

// Form is what a --credential value looks like, for usage and errors.
const Form = `alias=URL or alias={"url": ..., "hosts": [...], ...}`

// Parse reads one --credential value. The alias, the text before the
// first '=', must be a plain name: letters, digits, '_', '-' and '.'; the
// value after it must not be empty.
// Without that rule a URL with a query (postgres://u:p@h/db?sslmode=disable)
// given without its alias would be taken as the alias
// "postgres://u:p@h/db?sslmode".
func Parse(value string) (tools.Credential, error) {
	alias, rest, ok := strings.Cut(value, "=")
	switch {
	case !ok || alias == "":
		return tools.Credential{}, errors.New("no alias: want " + Form + " (the value is not shown: it may hold a password)")
	case !plainName(alias):
		return tools.Credential{}, errors.New("the text before the first '=' is not an alias (letters, digits, '_', '-', '.'): want " + Form + " (the value is not shown: it may hold a password)")
	case strings.TrimSpace(rest) == "":
		// As CURSORFLOW_CREDENTIAL_<ALIAS> set empty means no credential:
		// an empty URL would reach whatever database libpq's defaults do
		// (pg=$DATABASE_URL with the variable unset).
		return tools.Credential{}, fmt.Errorf("credential %q has an empty value (was the variable that should hold it unset?): want %s", alias, Form)
	}
	// Its error names the alias only.
	return tools.ParseCredential(alias, rest)
}

// Keychain parses every value of a repeated --credential flag into a
// keychain; a later value for an alias replaces an earlier one. Its error
// says which value (by position) is wrong, never what it holds.
func Keychain(values []string) (tools.StaticKeychain, error) {
	kc := make(tools.StaticKeychain, len(values))
	for i, v := range values {
		c, err := Parse(v)
		if err != nil {
			return nil, fmt.Errorf("--credential #%d: %w", i+1, err)
		}
		kc[c.Alias] = c
	}
	return kc, nil
}

// plainName reports whether s is made of letters, digits, '_', '-' and
// '.' only (ASCII: an alias also names an environment variable).
func plainName(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		default:
			return false
		}
	}
	return s != ""
}
