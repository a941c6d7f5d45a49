package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/internal/apitest"
)

// browser is an HTTP client that behaves as a browser does towards the
// dashboard: it keeps cookies, does not follow redirects (the test looks
// at them), and sends the headers a browser sends.
type browser struct {
	t      *testing.T
	base   string // the dashboard's origin plus mount prefix
	origin string
	c      *http.Client
}

func newBrowser(t *testing.T, origin, prefix string) *browser {
	t.Helper()
	jar := &cookieJar{}
	return &browser{t: t, base: origin + prefix, origin: origin, c: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// cookieJar is a minimal jar: every cookie goes to every request, so the
// test sees exactly what the server set (path and attributes are checked
// on the Set-Cookie header itself).
type cookieJar struct{ cookies []*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) {
	for _, c := range cs {
		kept := j.cookies[:0]
		for _, old := range j.cookies {
			if old.Name != c.Name {
				kept = append(kept, old)
			}
		}
		j.cookies = kept
		if c.MaxAge >= 0 && c.Value != "" {
			j.cookies = append(j.cookies, c)
		}
	}
}

func (j *cookieJar) Cookies(*url.URL) []*http.Cookie { return j.cookies }

// do sends a request; site is the Sec-Fetch-Site value ("" sends none)
// and origin the Origin header ("" sends none).
func (b *browser) do(method, path, site, origin string, form url.Values) response {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if site != "" {
		req.Header.Set("Sec-Fetch-Site", site)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: data}
}

// TestDashboardLogin walks the token login of the dashboard: the pages
// redirect to a login form, a wrong token is refused, the right one
// yields an HttpOnly, SameSite=Strict session cookie that is not the
// token, the cookie authenticates the API for same-origin requests only,
// and logging out ends it.
func TestDashboardLogin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.start(t, api.StartRequest{Source: gatedPlaybook})
	b.waitInFlight(t, id)
	br := newBrowser(t, b.URL(), "")

	r := br.do(http.MethodGet, "/ui/executions/"+id, "", "", nil)
	want(t, r, http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != "/ui/login?next=executions%2F"+id {
		t.Fatalf("redirect to %q", loc)
	}
	r = br.do(http.MethodGet, "/v1/executions/"+id, "same-origin", "", nil)
	want(t, r, http.StatusUnauthorized)
	r = br.do(http.MethodGet, "/ui/login?next=executions/"+id, "", "", nil)
	want(t, r, http.StatusOK)
	if !strings.Contains(string(r.body), `type="password"`) || !strings.Contains(string(r.body), `value="executions/`+id+`"`) {
		t.Fatalf("login page: %s", r.body)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("login page CSP %q", csp)
	}

	r = br.do(http.MethodPost, "/ui/login", "same-origin", b.URL(), url.Values{"token": {"wrong"}, "next": {"executions/" + id}})
	want(t, r, http.StatusUnauthorized)
	if len(r.header.Values("Set-Cookie")) != 0 || !strings.Contains(string(r.body), "not valid") {
		t.Fatalf("a wrong token: cookies %v, body %s", r.header.Values("Set-Cookie"), r.body)
	}
	r = br.do(http.MethodPost, "/ui/login", "cross-site", "https://evil.example", url.Values{"token": {testToken}})
	want(t, r, http.StatusForbidden)

	r = br.do(http.MethodPost, "/ui/login", "same-origin", b.URL(), url.Values{"token": {testToken}, "next": {"executions/" + id}})
	want(t, r, http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != "/ui/executions/"+id {
		t.Fatalf("after login, redirect to %q", loc)
	}
	setCookie := r.header.Get("Set-Cookie")
	for _, attr := range []string{api.SessionCookie + "=", "HttpOnly", "SameSite=Strict", "Path=/;"} {
		if !strings.Contains(setCookie, attr) {
			t.Errorf("Set-Cookie %q lacks %s", setCookie, attr)
		}
	}
	if strings.Contains(setCookie, testToken) {
		t.Fatalf("the cookie holds the token itself: %q", setCookie)
	}

	r = br.do(http.MethodGet, "/ui/executions/"+id, "", "", nil)
	want(t, r, http.StatusOK)
	if !strings.Contains(string(r.body), "execution.js") || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("execution page: %v %s", r.header, r.body)
	}
	r = br.do(http.MethodGet, "/v1/executions/"+id, "same-origin", "", nil)
	want(t, r, http.StatusOK)

	// A cookie-authenticated write must come from the dashboard's origin.
	for _, tc := range []struct{ site, origin string }{
		{"cross-site", ""},
		{"same-site", ""},
		{"", "https://evil.example"},
	} {
		r = br.do(http.MethodPost, "/v1/executions/"+id+"/cancel", tc.site, tc.origin, nil)
		want(t, r, http.StatusForbidden)
	}
	st := b.waitStatus(t, id, engine.StatusRunning)
	if st.Status != engine.StatusRunning {
		t.Fatal("a refused cancel ended the execution")
	}
	r = br.do(http.MethodPost, "/v1/executions/"+id+"/cancel", "same-origin", b.URL(), nil)
	want(t, r, http.StatusAccepted)
	b.waitStatus(t, id, engine.StatusCancelled)

	r = br.do(http.MethodPost, "/ui/logout", "same-origin", b.URL(), nil)
	want(t, r, http.StatusSeeOther)
	r = br.do(http.MethodGet, "/v1/executions/"+id, "same-origin", "", nil)
	want(t, r, http.StatusUnauthorized)

	// A cookie from before a token change is worthless.
	other := apitest.Start(t, apitest.Config{Token: "another-token", Logger: testLogger(t)})
	stale := newBrowser(t, other.URL(), "")
	stale.c.Jar.SetCookies(nil, []*http.Cookie{{Name: api.SessionCookie, Value: strings.TrimPrefix(strings.Split(setCookie, ";")[0], api.SessionCookie+"=")}})
	r = stale.do(http.MethodGet, "/v1/executions", "same-origin", "", nil)
	want(t, r, http.StatusUnauthorized)
}

// TestDashboardOpenWithoutToken: with no token the dashboard is open like
// the API, and still refuses writes that another site's page sends
// through the visitor's browser.
func TestDashboardOpenWithoutToken(t *testing.T) {
	t.Parallel()
	b := &bundle{apitest.Start(t, apitest.Config{Logger: testLogger(t)})}
	id := b.start(t, api.StartRequest{Source: gatedPlaybook})
	b.waitInFlight(t, id)
	br := newBrowser(t, b.URL(), "")
	r := br.do(http.MethodGet, "/ui/", "", "", nil)
	want(t, r, http.StatusOK)
	if strings.Contains(string(r.body), "Log out") {
		t.Error("an open dashboard offers to log out")
	}
	r = br.do(http.MethodGet, "/ui/login", "", "", nil)
	want(t, r, http.StatusSeeOther)
	r = br.do(http.MethodGet, "/ui/static/app.js", "", "", nil)
	want(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Errorf("app.js served as %q", ct)
	}
	r = br.do(http.MethodPost, "/v1/executions/"+id+"/cancel", "cross-site", "https://evil.example", nil)
	want(t, r, http.StatusForbidden)
	// A command-line client (no browser headers) is served.
	r = br.do(http.MethodPost, "/v1/executions/"+id+"/cancel", "", "", nil)
	want(t, r, http.StatusAccepted)
}

// TestDashboardUnderPrefix mounts the handler under /cf/ on a host's
// mux: redirects, the cookie's path and the pages' links carry the
// prefix.
func TestDashboardUnderPrefix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mux := http.NewServeMux()
	mux.Handle("/cf/", http.StripPrefix("/cf", b.HTTP.Config.Handler))
	host := httptest.NewServer(mux)
	defer host.Close()
	br := newBrowser(t, host.URL, "/cf")
	r := br.do(http.MethodGet, "/ui/", "", "", nil)
	want(t, r, http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != "/cf/ui/login?next=" {
		t.Fatalf("redirect to %q", loc)
	}
	r = br.do(http.MethodPost, "/ui/login", "same-origin", host.URL, url.Values{"token": {testToken}})
	want(t, r, http.StatusSeeOther)
	if loc, c := r.header.Get("Location"), r.header.Get("Set-Cookie"); loc != "/cf/ui/" || !strings.Contains(c, "Path=/cf/;") {
		t.Fatalf("after login: Location %q, Set-Cookie %q", loc, c)
	}
	r = br.do(http.MethodGet, "/ui/", "", "", nil)
	want(t, r, http.StatusOK)
	if !strings.Contains(string(r.body), `src="/cf/ui/static/list.js"`) {
		t.Fatalf("list page does not load its script under the prefix: %s", r.body)
	}
}

// TestOpenServerRefusesForeignHosts: a page of evil.example whose name
// now points at 127.0.0.1 (DNS rebinding) is same-origin with itself, so
// the origin checks pass it; an open server answers only under an IP
// address, localhost or a name it was given. With a token the name does
// not matter: such a page has no token.
func TestOpenServerRefusesForeignHosts(t *testing.T) {
	t.Parallel()
	send := func(t *testing.T, b *bundle, method, host, token string) int {
		t.Helper()
		req, err := http.NewRequest(method, b.URL()+"/v1/executions", strings.NewReader(`{"source": `+strconv.Quote(echoPlaybook)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Content-Type", "text/plain")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := b.HTTP.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	open := &bundle{apitest.Start(t, apitest.Config{Logger: testLogger(t), Configure: func(c *api.Config) {
		c.AllowedHosts = []string{"cf.internal"}
	}})}
	for host, status := range map[string]int{
		"evil.example:8080":   http.StatusForbidden,
		"evil.example":        http.StatusForbidden,
		"127.0.0.1:8080":      http.StatusCreated,
		"[::1]:8080":          http.StatusCreated,
		"localhost:8080":      http.StatusCreated,
		"app.localhost":       http.StatusCreated,
		"CF.internal:8080":    http.StatusCreated,
		"cf.internal.evil.io": http.StatusForbidden,
	} {
		if got := send(t, open, http.MethodPost, host, ""); got != status {
			t.Errorf("open server, Host %s: %d, want %d", host, got, status)
		}
	}
	if got := send(t, open, http.MethodGet, "evil.example", ""); got != http.StatusForbidden {
		t.Errorf("open server, a read under a foreign Host: %d, want 403", got)
	}
	closed := setup(t)
	if got := send(t, closed, http.MethodPost, "evil.example", testToken); got != http.StatusCreated {
		t.Errorf("server with a token, Host evil.example: %d, want 201", got)
	}
}
