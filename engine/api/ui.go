package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// The dashboard: plain HTML, CSS and JavaScript embedded in the binary
// (no build step), served under /ui/ by the same handler as the API and
// reading the API from the browser. With a token configured, GET /ui/login
// asks for it once; POST /ui/login checks it and keeps a session value
// derived from it in an HttpOnly, SameSite=Strict cookie, which the API
// accepts in place of the Authorization header (see authenticate).

//go:embed ui
var uiFiles embed.FS

var uiPages = template.Must(template.ParseFS(uiFiles, "ui/*.html"))

// SessionCookie is the name of the dashboard's session cookie.
const SessionCookie = "cursorflow_session"

// sessionMaxAge is how long a browser keeps the session cookie.
const sessionMaxAge = 30 * 24 * time.Hour

// sessionValue derives the session cookie's value from the token: a
// browser never holds the token itself, and a new token ends every
// session. Empty without a token.
func sessionValue(token string) string {
	if token == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("cursorflow dashboard session v1"))
	return hex.EncodeToString(m.Sum(nil))
}

func (s *server) validSession(r *http.Request) bool {
	c, err := r.Cookie(SessionCookie)
	return err == nil && s.session != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.session)) == 1
}

// mountUI adds the dashboard's routes to mux.
func (s *server) mountUI(mux *http.ServeMux) {
	static, _ := fs.Sub(uiFiles, "ui/static")
	mux.Handle("GET /ui/static/", uiHeaders(http.StripPrefix("/ui/static/", http.FileServerFS(static))))
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, mountPrefix(r)+"/ui/", http.StatusMovedPermanently)
	})
	mux.Handle("GET /ui/{$}", s.page("list.html"))
	mux.Handle("GET /ui/executions/{id}", s.page("execution.html"))
	mux.Handle("GET /ui/login", uiHeaders(http.HandlerFunc(s.loginPage)))
	mux.Handle("POST /ui/login", uiHeaders(http.HandlerFunc(s.login)))
	mux.Handle("POST /ui/logout", uiHeaders(http.HandlerFunc(s.logout)))
}

// pageData is what the page templates see.
type pageData struct {
	// Base is the prefix the handler is mounted under ("" at the root).
	Base string
	// Auth is true when a token is configured (the page offers logout).
	Auth  bool
	Error string
	Next  string
}

// page serves a dashboard page, sending a browser without a session to
// the login page first.
func (s *server) page(name string) http.Handler {
	return uiHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := mountPrefix(r)
		if s.cfg.Token != "" && !s.validSession(r) {
			next := strings.TrimPrefix(r.URL.Path, "/ui/")
			http.Redirect(w, r, base+"/ui/login?next="+url.QueryEscape(next), http.StatusSeeOther)
			return
		}
		s.render(w, r, http.StatusOK, name, pageData{Base: base, Auth: s.cfg.Token != ""})
	}))
}

func (s *server) render(w http.ResponseWriter, r *http.Request, status int, name string, data pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := uiPages.ExecuteTemplate(w, name, data); err != nil {
		s.log.ErrorContext(r.Context(), "api: render dashboard page", "page", name, "error", err)
	}
}

// nextPage is where login may send the browser: the list or an execution
// page, nothing else.
var nextPage = regexp.MustCompile(`^(executions/[A-Za-z0-9._~-]+)?$`)

func (s *server) loginPage(w http.ResponseWriter, r *http.Request) {
	base := mountPrefix(r)
	if s.cfg.Token == "" || s.validSession(r) {
		http.Redirect(w, r, base+"/ui/", http.StatusSeeOther)
		return
	}
	next := r.URL.Query().Get("next")
	if !nextPage.MatchString(next) {
		next = ""
	}
	s.render(w, r, http.StatusOK, "login.html", pageData{Base: base, Auth: true, Next: next})
}

// login checks the token a browser posted and sets the session cookie.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	base := mountPrefix(r)
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "cross-origin login refused")
		return
	}
	if s.cfg.Token == "" {
		http.Redirect(w, r, base+"/ui/", http.StatusSeeOther)
		return
	}
	if s.refuseLimited(w, r) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	next := r.PostFormValue("next")
	if !nextPage.MatchString(next) {
		next = ""
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(r.PostFormValue("token"))))
	if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
		s.authLimit.failed(clientAddr(r))
		s.log.WarnContext(r.Context(), "api: dashboard login with a wrong token", "remote", r.RemoteAddr)
		s.render(w, r, http.StatusUnauthorized, "login.html", pageData{Base: base, Auth: true, Next: next, Error: "That token is not valid."})
		return
	}
	http.SetCookie(w, s.cookie(r, s.session, int(sessionMaxAge.Seconds())))
	http.Redirect(w, r, base+"/ui/"+next, http.StatusSeeOther)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "cross-origin logout refused")
		return
	}
	http.SetCookie(w, s.cookie(r, "", -1))
	http.Redirect(w, r, mountPrefix(r)+"/ui/login", http.StatusSeeOther)
}

// cookie is the session cookie, scoped to where the handler is mounted.
func (s *server) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: SessionCookie, Value: value, Path: mountPrefix(r) + "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
}

// mountPrefix returns the path the handler is mounted under when a host
// serves it behind http.StripPrefix ("/cursorflow"), or "".
func mountPrefix(r *http.Request) string {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return ""
	}
	prefix, ok := strings.CutSuffix(u.Path, r.URL.Path)
	if !ok {
		return ""
	}
	return strings.TrimSuffix(prefix, "/")
}

// uiHeaders adds the dashboard's security headers: scripts, styles and
// requests only from this origin, no framing, no referrer.
func uiHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "+
			"img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if strings.HasPrefix(r.URL.Path, "/ui/static/") {
			h.Set("Cache-Control", "no-cache")
		} else {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}
