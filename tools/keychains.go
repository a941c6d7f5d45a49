package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cursorflow/cursorflow/internal/jsonnum"
)

// EnvCredentialPrefix is the prefix EnvKeychain puts before an alias when
// it has no Prefix of its own.
const EnvCredentialPrefix = "CURSORFLOW_CREDENTIAL_"

// notFound builds the error every keychain returns for a missing alias.
func notFound(alias string) error {
	return fmt.Errorf("%w: alias %q", ErrCredentialNotFound, alias)
}

// StaticKeychain is a fixed map from alias to Credential, handy for tests
// and for hosts that resolve secrets themselves at start-up. A credential
// whose Alias is empty is returned with the map key as its alias. Do not
// modify the map while it is in use.
type StaticKeychain map[string]Credential

// StaticURLs builds a StaticKeychain from alias → connection URL.
func StaticURLs(urls map[string]string) StaticKeychain {
	k := make(StaticKeychain, len(urls))
	for alias, u := range urls {
		k[alias] = Credential{Alias: alias, URL: u}
	}
	return k
}

// Resolve returns the credential stored under alias.
func (k StaticKeychain) Resolve(_ context.Context, alias string) (Credential, error) {
	c, ok := k[alias]
	if !ok {
		return Credential{}, notFound(alias)
	}
	if c.Alias == "" {
		c.Alias = alias
	}
	return c, nil
}

// EnvKeychain resolves an alias from the environment variable Prefix +
// the alias upper-cased with every character other than A-Z and 0-9
// replaced by '_' (alias "pg-main.k8s" → CURSORFLOW_CREDENTIAL_PG_MAIN_K8S).
// The variable's value is the credential URL; a value starting with '{' is
// read as a JSON object {"url": ..., "token": ..., "hosts": [...], ...}
// whose other string fields become Credential.Fields. The environment is read on every
// Resolve. The zero value is ready to use.
type EnvKeychain struct {
	// Prefix is put before the normalised alias. Defaults to
	// EnvCredentialPrefix.
	Prefix string
}

// EnvName returns the environment variable EnvKeychain reads for alias.
func (k EnvKeychain) EnvName(alias string) string {
	p := k.Prefix
	if p == "" {
		p = EnvCredentialPrefix
	}
	var b strings.Builder
	b.Grow(len(p) + len(alias))
	b.WriteString(p)
	for _, r := range alias {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Resolve reads the alias's environment variable.
func (k EnvKeychain) Resolve(_ context.Context, alias string) (Credential, error) {
	name := k.EnvName(alias)
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return Credential{}, notFound(alias)
	}
	c, err := ParseCredential(alias, v)
	if err != nil {
		// The value is a secret: report the variable, never its content.
		return Credential{}, fmt.Errorf("tools: credential %q: %s holds invalid JSON", alias, name)
	}
	return c, nil
}

// ParseCredential reads alias's credential from value as EnvKeychain does:
// the URL, or, when value starts with '{', a JSON object {"url": ...,
// "token": ..., "hosts": [...], ...} whose other string fields become
// Credential.Fields. Its error names neither the value nor any part of it.
func ParseCredential(alias, value string) (Credential, error) {
	if !strings.HasPrefix(strings.TrimSpace(value), "{") {
		return Credential{Alias: alias, URL: value}, nil
	}
	var raw map[string]any
	// jsonnum: a numeric field past 2^53 (an account id) keeps its digits.
	if err := jsonnum.Unmarshal([]byte(value), &raw); err != nil {
		return Credential{}, fmt.Errorf("tools: credential %q: invalid JSON", alias)
	}
	return credentialFromMap(alias, raw), nil
}

// FileKeychain holds the credentials of a YAML or JSON file read once, at
// construction. The file maps each alias either to a URL string or to an
// object whose "url" (or "dsn") key is the URL, whose "hosts" list
// becomes Credential.Hosts and whose other scalar keys become
// Credential.Fields:
//
//	pg_main: postgres://app:secret@db:5432/app
//	api:
//	  url: https://api.example.com   # sent to api.example.com only
//	  token: abc123
//	partner:
//	  token: def456
//	  hosts: [partner.example.com, "*.partner-cdn.example"]
type FileKeychain struct {
	path  string
	creds StaticKeychain
}

// NewFileKeychain reads and parses path. Errors name the file but never
// quote its content.
func NewFileKeychain(path string) (*FileKeychain, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tools: read keychain file: %w", err)
	}
	var raw map[string]any
	// YAML is a superset of JSON, so one decoder reads both formats.
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("tools: keychain file %s is not a YAML/JSON mapping", path)
	}
	creds := make(StaticKeychain, len(raw))
	for alias, v := range raw {
		switch v := v.(type) {
		case string:
			creds[alias] = Credential{Alias: alias, URL: v}
		case map[string]any:
			creds[alias] = credentialFromMap(alias, v)
		default:
			return nil, fmt.Errorf("tools: keychain file %s: alias %q must map to a URL string or an object", path, alias)
		}
	}
	return &FileKeychain{path: path, creds: creds}, nil
}

// Aliases returns the number of aliases the file defines.
func (k *FileKeychain) Aliases() int { return len(k.creds) }

// Resolve returns the credential the file defines for alias.
func (k *FileKeychain) Resolve(ctx context.Context, alias string) (Credential, error) {
	return k.creds.Resolve(ctx, alias)
}

// credentialFromMap turns {url|dsn, hosts, other scalars...} into a
// Credential. hosts is a list or a comma-separated string.
func credentialFromMap(alias string, m map[string]any) Credential {
	c := Credential{Alias: alias}
	for key, v := range m {
		if key == "hosts" {
			c.Hosts = hostList(v)
			continue
		}
		s, ok := scalarString(v)
		if !ok {
			continue
		}
		switch key {
		case "url", "dsn":
			if c.URL == "" || key == "url" {
				c.URL = s
			}
		default:
			if c.Fields == nil {
				c.Fields = make(map[string]string, len(m))
			}
			c.Fields[key] = s
		}
	}
	return c
}

func hostList(v any) []string {
	var out []string
	add := func(s string) {
		for _, h := range strings.Split(s, ",") {
			if h = strings.TrimSpace(h); h != "" {
				out = append(out, h)
			}
		}
	}
	switch v := v.(type) {
	case string:
		add(v)
	case []any:
		for _, e := range v {
			if s, ok := scalarString(e); ok {
				add(s)
			}
		}
	}
	return out
}

func scalarString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	}
	return "", false
}

// ChainKeychain asks each keychain in order; the first one that knows the
// alias wins. An error other than ErrCredentialNotFound stops the search
// and is returned.
type ChainKeychain []Keychain

// Resolve returns the first credential found for alias.
func (k ChainKeychain) Resolve(ctx context.Context, alias string) (Credential, error) {
	for _, kc := range k {
		if kc == nil {
			continue
		}
		c, err := kc.Resolve(ctx, alias)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, ErrCredentialNotFound) {
			return Credential{}, err
		}
	}
	return Credential{}, notFound(alias)
}

// Redacted replaces each secret Redact removes.
const Redacted = "[REDACTED]"

// secretFieldWords mark a Credential field as secret when its key contains
// one of them.
var secretFieldWords = [...]string{"pass", "token", "secret", "key", "auth"}

// Redact removes the secrets of creds from s, typically an error message
// about to become Output.Error (a driver error can echo its DSN). The full
// URL is replaced by "credential(<alias>)"; the URL's password (raw and
// percent-encoded), a "password=..." DSN parameter and every field whose
// key looks secret (password, token, secret, api_key, ...) are replaced by
// Redacted.
func Redact(s string, creds ...Credential) string {
	for _, c := range creds {
		if c.URL != "" {
			s = strings.ReplaceAll(s, c.URL, c.String())
		}
		for _, secret := range credentialSecrets(c) {
			if secret != "" {
				s = strings.ReplaceAll(s, secret, Redacted)
			}
		}
	}
	return s
}

// MinRedactedSecret is the shortest secret RedactValue looks for: a
// shorter one would also match ordinary data (a password "abc" in every
// word that holds it), so it is left alone there.
const MinRedactedSecret = 6

// RedactValue returns v, a plain decoded value (maps, lists, strings,
// scalars) such as a response an endpoint echoed, with every secret of
// creds that is at least MinRedactedSecret long replaced by Redacted in
// its strings and map keys. Maps and lists are copied; v itself is not
// modified.
func RedactValue(v any, creds ...Credential) any {
	return SecretsOf(creds...).RedactValue(v)
}

// Secrets is what RedactValue and JSONHoldsSecret look for in a set of
// credentials, worked out once. Working it out parses each credential's
// URL; a caller that checks many values against one set (every report of
// a command, every row of a frame) keeps a Secrets instead of passing
// the credentials each time. The zero Secrets holds none.
type Secrets struct {
	// list is longest first (see redactedSecrets).
	list []string
}

// SecretsOf returns the secrets of creds that RedactValue replaces.
func SecretsOf(creds ...Credential) Secrets {
	return Secrets{list: redactedSecrets(creds)}
}

// Empty reports whether s holds no secret: nothing to redact.
func (s Secrets) Empty() bool { return len(s.list) == 0 }

// RedactValue is the package's RedactValue with the credentials s was
// made of.
func (s Secrets) RedactValue(v any) any {
	if len(s.list) == 0 {
		return v
	}
	return redactIn(v, s.list)
}

// redactedSecrets lists the strings of creds that RedactValue replaces,
// longest first, so a secret inside another is not replaced before the
// one that holds it.
func redactedSecrets(creds []Credential) []string {
	var secrets []string
	for _, c := range creds {
		if c.URL != "" && len(c.URL) >= MinRedactedSecret {
			secrets = append(secrets, c.URL)
		}
		for _, s := range credentialSecrets(c) {
			if len(s) >= MinRedactedSecret {
				secrets = append(secrets, s)
			}
		}
	}
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	return secrets
}

// JSONHoldsSecret reports whether decoding the JSON text b and passing it
// to RedactValue with creds could change anything: whether one of the
// secrets appears in one of its strings (or keys). A false answer means
// the text can be kept as it is, without decoding and encoding it again.
// b must be valid JSON.
func JSONHoldsSecret(b []byte, creds ...Credential) bool {
	return SecretsOf(creds...).InJSON(b)
}

// InJSON is the package's JSONHoldsSecret with the credentials s was
// made of.
func (s Secrets) InJSON(b []byte) bool {
	secrets := s.list
	if len(secrets) == 0 {
		return false
	}
	// A string without escapes reads as its bytes: a secret in it is in b.
	for _, secret := range secrets {
		if bytes.Contains(b, []byte(secret)) {
			return true
		}
	}
	// A string with escapes has to be decoded to be searched; text
	// without a backslash has none.
	if bytes.IndexByte(b, '\\') < 0 {
		return false
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		start, escaped := i, false
		for i++; i < len(b) && b[i] != '"'; i++ {
			if b[i] == '\\' {
				escaped = true
				i++
			}
		}
		if !escaped {
			continue
		}
		var text string
		if err := json.Unmarshal(b[start:min(i+1, len(b))], &text); err != nil {
			return true // not what it seemed: let the caller decode it all
		}
		for _, secret := range secrets {
			if strings.Contains(text, secret) {
				return true
			}
		}
	}
	return false
}

func redactIn(v any, secrets []string) any {
	switch x := v.(type) {
	case string:
		for _, s := range secrets {
			if strings.Contains(x, s) {
				x = strings.ReplaceAll(x, s, Redacted)
			}
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactIn(e, secrets)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[redactIn(k, secrets).(string)] = redactIn(e, secrets)
		}
		return out
	}
	return v
}

// credentialSecrets lists the strings of c that must not be shown.
func credentialSecrets(c Credential) []string {
	var out []string
	if user, pass := c.Fields["username"], c.Fields["password"]; user != "" || pass != "" {
		// The Basic authorization an http call sends, as an endpoint that
		// echoes headers would show it.
		out = append(out, base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
	}
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok {
				out = append(out, p)
			}
		}
		// key=value DSNs: "host=db password=secret" and URL query
		// parameters ?password=secret.
		for _, f := range strings.FieldsFunc(c.URL, func(r rune) bool { return r == ' ' || r == '&' || r == '?' || r == ';' }) {
			k, v, ok := strings.Cut(f, "=")
			if ok && strings.Contains(strings.ToLower(k), "pass") {
				out = append(out, strings.Trim(v, "'"))
			}
		}
	}
	for k, v := range c.Fields {
		lk := strings.ToLower(k)
		for _, w := range secretFieldWords {
			if strings.Contains(lk, w) {
				out = append(out, v)
				break
			}
		}
	}
	for _, v := range out {
		for _, e := range urlForms(v)[1:] {
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
	}
	return out
}

// urlForms returns s followed by the other forms it takes in a URL
// (percent-encoded as a query parameter, as a path segment), each once. A
// secret sent in a URL comes back in those forms from an endpoint that
// echoes its request, or in a next-page link that carries it.
func urlForms(s string) []string {
	forms := []string{s}
	for _, e := range [...]string{url.QueryEscape(s), url.PathEscape(s)} {
		if !slices.Contains(forms, e) {
			forms = append(forms, e)
		}
	}
	return forms
}
