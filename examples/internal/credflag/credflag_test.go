package credflag_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/examples/internal/credflag"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		value, alias, url string
		hosts             []string
	}{
		{"pg=postgres://app:pw@db/app", "pg", "postgres://app:pw@db/app", nil},
		{"pg_main.v-2=postgres://u:p@h/db?sslmode=disable", "pg_main.v-2", "postgres://u:p@h/db?sslmode=disable", nil},
		{`api={"url": "https://api.example.com", "hosts": ["api.example.com"]}`, "api", "https://api.example.com", []string{"api.example.com"}},
	} {
		c, err := credflag.Parse(tc.value)
		if err != nil || c.Alias != tc.alias || c.URL != tc.url || !slices.Equal(c.Hosts, tc.hosts) {
			t.Errorf("Parse(%q) = %+v, %v", tc.value, c, err)
		}
	}
}

// TestParseNeverEchoes: a value without an alias, or whose text before
// the first '=' is no plain name (a URL with a query, given without its
// alias), is refused with an error that quotes no part of it.
func TestParseNeverEchoes(t *testing.T) {
	for _, value := range []string{
		"postgres://app:pw@db/app",
		"postgres://u:pw@h/db?sslmode=disable",
		"=postgres://app:pw@db/app",
		"my alias=postgres://app:pw@db/app",
		`pg={"url": "postgres://app:pw@db/app"`, // invalid JSON
	} {
		_, err := credflag.Parse(value)
		if err == nil {
			t.Errorf("Parse(%q) accepted it", value)
			continue
		}
		for _, secret := range []string{"pw", "postgres", "db/app", "sslmode"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Parse(%q): error %q shows %q", value, err, secret)
			}
		}
	}
	if _, err := credflag.Keychain([]string{"pg=postgres://x", "postgres://u:pw@h/db?sslmode=disable"}); err == nil ||
		!strings.Contains(err.Error(), "--credential #2") || strings.Contains(err.Error(), "pw") {
		t.Errorf("Keychain: %v", err)
	}
}

// TestParseRefusesAnEmptyValue: --credential pg=$DATABASE_URL with the
// variable unset gives pg an empty URL, which a postgres task would take
// as libpq's defaults and run against whatever database those reach.
// CURSORFLOW_CREDENTIAL_PG set empty means no credential; the flag
// refuses it, naming the alias.
func TestParseRefusesAnEmptyValue(t *testing.T) {
	for _, value := range []string{"pg=", "pg=  "} {
		if c, err := credflag.Parse(value); err == nil || !strings.Contains(err.Error(), `"pg"`) {
			t.Errorf("Parse(%q) = %+v, %v; want an error naming the alias", value, c, err)
		}
	}
}
