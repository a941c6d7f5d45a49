package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// playbookStores returns each Store the API ships: the in-memory one and
// the PostgreSQL one (skipped, or failed under CI=true, without a
// database).
func playbookStores(t *testing.T) map[string]func(t *testing.T) api.Store {
	return map[string]func(t *testing.T) api.Store{
		"memory": func(*testing.T) api.Store { return api.NewMemoryStore() },
		"postgres": func(t *testing.T) api.Store {
			pool, err := pgxpool.New(t.Context(), testenv.PostgresSchema(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			st, err := api.NewPostgresStore(t.Context(), pool, "pb_"+testenv.RandomSuffix(t))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
}

// TestPlaybookInputNoStoreCanHold: a playbook name with a NUL byte, a
// control character or invalid UTF-8, and a version past the store's
// int4, name no playbook. The PostgreSQL store used to pass them to the
// database, which refused them, and the API answered 500 "internal
// error"; they now answer 404 (or 400 for a registration), whatever the
// store.
func TestPlaybookInputNoStoreCanHold(t *testing.T) {
	for name, open := range playbookStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)
			b := setup(t, func(c *api.Config) { c.Playbooks = st })
			want(t, b.do(t, http.MethodPost, "/v1/playbooks", echoPlaybook), http.StatusCreated)

			for _, name := range []string{"%00", "a%00b", "%01", "%ff", "%ff%fe", "x%0Ay"} {
				r := b.do(t, http.MethodGet, "/v1/playbooks/"+name, nil)
				want(t, r, http.StatusNotFound)
				r.errorBody(t)
			}
			for _, name := range []string{"\x00", "a\x00b", "\x01", "\xff", "x\ny"} {
				r := b.do(t, http.MethodPost, "/v1/executions", api.StartRequest{Playbook: name})
				want(t, r, http.StatusNotFound)
				r.errorBody(t)
			}
			for _, v := range []string{"2147483648", "3000000000", "9223372036854775807"} {
				r := b.do(t, http.MethodGet, "/v1/playbooks/echo?version="+v, nil)
				want(t, r, http.StatusNotFound)
				if e := r.errorBody(t); !strings.Contains(e.Error, "no version "+v) {
					t.Errorf("version %s: %q does not say which version is missing", v, e.Error)
				}
				r = b.do(t, http.MethodPost, "/v1/executions", `{"playbook": "echo", "version": `+v+`}`)
				want(t, r, http.StatusNotFound)
				if e := r.errorBody(t); !strings.Contains(e.Error, "no version "+v) {
					t.Errorf("start version %s: %q does not say which version is missing", v, e.Error)
				}
			}
			// Still behind the token.
			want(t, b.doToken(t, "", http.MethodGet, "/v1/playbooks/%00", nil), http.StatusUnauthorized)

			// A name no store can hold is refused at registration, naming
			// the field, and nothing is stored.
			for _, name := range []string{`"a\0b"`, `"a\x01b"`, `"tab\there"`} {
				src := strings.Replace(echoPlaybook, "name: echo", "name: "+name, 1)
				r := b.do(t, http.MethodPost, "/v1/playbooks", src)
				want(t, r, http.StatusBadRequest)
				e := r.errorBody(t)
				said := e.Error
				for _, p := range e.Problems {
					said += "\n" + p.Position + ": " + p.Message
				}
				if !strings.Contains(said, "metadata.name") {
					t.Errorf("name %s: %q does not name the field", name, said)
				}
			}
			var list api.PlaybookList
			r := b.do(t, http.MethodGet, "/v1/playbooks", nil)
			want(t, r, http.StatusOK)
			r.decode(t, &list)
			if len(list.Playbooks) != 1 {
				t.Fatalf("list %+v: want only echo", list)
			}
		})
	}
}

// TestPlaybookNameTooLong: a metadata.name of a few kilobytes that does
// not compress (PostgreSQL's btree index takes at most 2704 bytes a row)
// made the PostgreSQL store's insert fail, and the API answered 500
// "internal error" and logged the whole name; it is now refused with a
// 400 naming the field and the limit, whatever the store, and nothing is
// stored. A name at the limit registers.
func TestPlaybookNameTooLong(t *testing.T) {
	// Incompressible text: each 4-byte run differs.
	long := func(n int) string {
		var sb strings.Builder
		for i := 0; sb.Len() < n; i++ {
			sb.WriteString(strconv.FormatInt(int64(i)*2654435761%1000003, 36))
		}
		return sb.String()[:n]
	}
	for name, open := range playbookStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)
			b := setup(t, func(c *api.Config) { c.Playbooks = st })
			src := strings.Replace(echoPlaybook, "name: echo", "name: "+long(3000), 1)
			r := b.do(t, http.MethodPost, "/v1/playbooks", src)
			want(t, r, http.StatusBadRequest)
			if e := r.errorBody(t); !strings.Contains(e.Error, "metadata.name") || !strings.Contains(e.Error, strconv.Itoa(api.MaxPlaybookName)) {
				t.Errorf("%q does not name the field and its limit", e.Error)
			}
			var list api.PlaybookList
			r = b.do(t, http.MethodGet, "/v1/playbooks", nil)
			want(t, r, http.StatusOK)
			r.decode(t, &list)
			if len(list.Playbooks) != 0 {
				t.Fatalf("list %+v: want none", list)
			}
			atLimit := long(api.MaxPlaybookName)
			src = strings.Replace(echoPlaybook, "name: echo", "name: "+atLimit, 1)
			want(t, b.do(t, http.MethodPost, "/v1/playbooks", src), http.StatusCreated)
			want(t, b.do(t, http.MethodGet, "/v1/playbooks/"+atLimit, nil), http.StatusOK)
		})
	}
}
