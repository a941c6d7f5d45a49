package http_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/tools"
	cfhttp "github.com/cursorflow/cursorflow/tools/http"
)

// Servers that break the way real networks do: the faults are in the
// servers, the tool is the real one.

// recorder is a server that notes the credential-bearing headers of every
// request it gets, and redirects to the query's "to" when it has one.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []nethttp.Header
}

func (r *recorder) ServeHTTP(w nethttp.ResponseWriter, req *nethttp.Request) {
	r.mu.Lock()
	r.seen = append(r.seen, req.Header.Clone())
	r.mu.Unlock()
	if to := req.URL.Query().Get("to"); to != "" {
		code := nethttp.StatusFound
		if c := req.URL.Query().Get("code"); c != "" {
			fmt.Sscan(c, &code)
		}
		io.Copy(io.Discard, req.Body)
		nethttp.Redirect(w, req, to, code)
		return
	}
	io.WriteString(w, "landed")
}

func (r *recorder) headers() []nethttp.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]nethttp.Header(nil), r.seen...)
}

func newRecorder(t *testing.T, tls bool) *recorder {
	t.Helper()
	r := &recorder{}
	if tls {
		r.srv = httptest.NewTLSServer(r)
	} else {
		r.srv = httptest.NewServer(r)
	}
	t.Cleanup(r.srv.Close)
	return r
}

// TestRedirectToPlainHTTPDropsCredential: a credential allowed for a
// host name (any port) is sent over https; the server redirects to plain
// http on the same name (another port). The credential must not cross in
// clear text: net/http keeps Authorization for the same name, and the
// entry allows the name.
func TestRedirectToPlainHTTPDropsCredential(t *testing.T) {
	t.Parallel()
	a := newRecorder(t, true)
	b := newRecorder(t, false)
	kc := tools.StaticKeychain{
		"bearer": {Hosts: []string{"127.0.0.1"}, Fields: map[string]string{"token": "tok-0123456789"}},
		"key":    {Hosts: []string{"127.0.0.1"}, Fields: map[string]string{"api_key": "key-0123456789"}},
		"basic":  {Hosts: []string{"127.0.0.1"}, Fields: map[string]string{"username": "u", "password": "pw-0123456789"}},
	}
	tool := cfhttp.New(cfhttp.Config{Client: a.srv.Client(), NoPacing: true})
	for _, alias := range []string{"bearer", "key", "basic"} {
		for _, code := range []int{302, 307, 308} {
			out, err := tool.Execute(context.Background(), &tools.Call{Keychain: kc, Config: map[string]any{
				"method": "POST", "url": a.srv.URL + "/?code=" + fmt.Sprint(code) + "&to=" + url.QueryEscape(b.srv.URL+"/landed"),
				"auth": alias, "json": map[string]any{"x": 1},
			}})
			if err != nil {
				t.Fatalf("%s %d: %v", alias, code, err)
			}
			if out.Status != tools.StatusSuccess {
				t.Fatalf("%s %d: %+v", alias, code, out)
			}
		}
	}
	if n := len(a.headers()); n != 9 {
		t.Fatalf("https server saw %d requests, want 9", n)
	}
	for _, h := range a.headers() {
		if h.Get("Authorization") == "" && h.Get("X-API-Key") == "" {
			t.Errorf("the allowed https host got no credential: %v", h)
		}
	}
	for _, h := range b.headers() {
		if h.Get("Authorization") != "" || h.Get("X-API-Key") != "" {
			t.Errorf("credential sent in clear text after a redirect from https: Authorization %q X-API-Key %q",
				h.Get("Authorization"), h.Get("X-API-Key"))
		}
	}
}

// TestRedirectSameOriginKeepsInlineCredential: an inline auth block
// (auth: {type: bearer, token}) has no keychain entry to list hosts; a
// redirect within the same origin (a trailing-slash redirect) keeps it,
// as it keeps any other header, while a redirect to another origin
// drops it.
func TestRedirectSameOriginKeepsInlineCredential(t *testing.T) {
	t.Parallel()
	a := newRecorder(t, false)
	b := newRecorder(t, false)
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	auth := map[string]any{"type": "bearer", "token": "tok-0123456789"}
	out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{
		"url": a.srv.URL + "/api?to=" + url.QueryEscape("/api/"), "auth": auth}})
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("%v %+v", err, out)
	}
	hs := a.headers()
	if len(hs) != 2 || hs[1].Get("Authorization") != "Bearer tok-0123456789" {
		t.Errorf("same-origin redirect lost the inline credential: %v", hs)
	}
	// Another port is another origin.
	out, err = tool.Execute(context.Background(), &tools.Call{Config: map[string]any{
		"url": a.srv.URL + "/api?to=" + url.QueryEscape(b.srv.URL+"/x"), "auth": auth}})
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("%v %+v", err, out)
	}
	noAuthorization(t, b.headers(), "inline credential")
}

// noAuthorization fails t if any of hs, the headers another origin
// received after a redirect, carries an Authorization (what's).
func noAuthorization(t *testing.T, hs []nethttp.Header, what string) {
	t.Helper()
	for _, h := range hs {
		if h.Get("Authorization") != "" {
			t.Errorf("%s followed a redirect to another origin: %q", what, h.Get("Authorization"))
		}
	}
}

// TestRedirectRefererCarriesNoQuery: a key in the query string of a
// request to host A must not reach host B in the Referer net/http sets
// on the redirected request.
func TestRedirectRefererCarriesNoQuery(t *testing.T) {
	t.Parallel()
	a := newRecorder(t, false)
	b := newRecorder(t, false)
	bURL, _ := url.Parse(b.srv.URL)
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{
		"url": a.srv.URL + "/?api_key=key-0123456789&to=" + url.QueryEscape("http://localhost:"+bURL.Port()+"/x")}})
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("%v %+v", err, out)
	}
	hs := b.headers()
	if len(hs) != 1 {
		t.Fatalf("redirect target saw %d requests", len(hs))
	}
	if ref := hs[0].Get("Referer"); strings.Contains(ref, "key-0123456789") {
		t.Errorf("the query's key reached another host in the Referer: %q", ref)
	}
}

// TestRedirectLoop: a server that redirects to itself forever ends in a
// bounded number of requests and an error saying so, without the query's
// secret.
func TestRedirectLoop(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		nethttp.Redirect(w, r, r.URL.String(), nethttp.StatusFound)
	}))
	t.Cleanup(srv.Close)
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	for _, cfg := range []map[string]any{
		{"url": srv.URL + "/loop?api_key=key-0123456789"},
		{"url": srv.URL + "/loop?api_key=key-0123456789", "auth": map[string]any{"type": "bearer", "token": "tok-0123456789"}},
	} {
		mu.Lock()
		n = 0
		mu.Unlock()
		out, err := tool.Execute(context.Background(), &tools.Call{Step: "fetch", Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != tools.StatusError || !strings.Contains(out.Error, "redirect") {
			t.Errorf("status %q error %q, want an error about redirects", out.Status, out.Error)
		}
		if strings.Contains(out.Error, "key-0123456789") || strings.Contains(out.Error, "tok-0123456789") {
			t.Errorf("error text holds a secret: %q", out.Error)
		}
		mu.Lock()
		if n > 11 {
			t.Errorf("%d requests for a redirect loop", n)
		}
		mu.Unlock()
	}
}

// TestTransportErrorHidesURLSecrets: a request that gets no answer (the
// port is closed) says so without the URL's password or query.
func TestTransportErrorHidesURLSecrets(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	out, err := tool.Execute(context.Background(), &tools.Call{Step: "fetch", Config: map[string]any{
		"url": "http://user:pw-0123456789@" + addr + "/v1?api_key=key-0123456789&x=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != tools.StatusError {
		t.Fatalf("status %q", out.Status)
	}
	for _, s := range []string{"pw-0123456789", "key-0123456789"} {
		if strings.Contains(out.Error, s) {
			t.Errorf("error text holds %q: %q", s, out.Error)
		}
	}
	if !strings.Contains(out.Error, addr+"/v1") {
		t.Errorf("error %q does not name the url", out.Error)
	}
}

// trickle sends headers, then one byte per tick until the client leaves.
func trickle(tick time.Duration, contentType string) nethttp.HandlerFunc {
	return func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(200)
		w.(nethttp.Flusher).Flush()
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
				if _, err := w.Write([]byte("[")); err != nil {
					return
				}
				w.(nethttp.Flusher).Flush()
			}
		}
	}
}

// TestTrickledBodyTimesOut: a server that sends its headers at once, then
// its body a byte at a time, runs out the task's timeout; the output says
// it timed out (policies see output.error.kind timeout, as for a server
// that sends nothing) and names the url without its query.
func TestTrickledBodyTimesOut(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(trickle(20*time.Millisecond, "application/json"))
	t.Cleanup(srv.Close)
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	start := time.Now()
	out, err := tool.Execute(context.Background(), &tools.Call{Step: "fetch", Config: map[string]any{
		"url": srv.URL + "/feed?api_key=key-0123456789", "timeout": 0.3}})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %s for a 0.3s timeout", el)
	}
	if out.Status != tools.StatusError || out.HTTP["timeout"] != true {
		t.Errorf("status %q http %v, want a timeout", out.Status, out.HTTP)
	}
	if !strings.Contains(out.Error, "timeout") || !strings.Contains(out.Error, "/feed") || strings.Contains(out.Error, "key-0123456789") {
		t.Errorf("error %q: want a timeout naming the url without its query", out.Error)
	}

	// The step's spec.timeout (the caller's deadline) ends it first.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	out, err = tool.Execute(ctx, &tools.Call{Step: "fetch", Config: map[string]any{"url": srv.URL + "/feed"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.HTTP["timeout"] != true || !strings.Contains(out.Error, "caller's deadline") || strings.Contains(out.Error, cfhttp.DefaultTimeout.String()) {
		t.Errorf("http %v error %q, want the caller's deadline", out.HTTP, out.Error)
	}
}

// TestSilentServers: a server that never answers, and one that accepts a
// connection and never reads the request body, both end at the timeout.
func TestSilentServers(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	for name, cfg := range map[string]map[string]any{
		"no headers":      {"url": "http://" + ln.Addr().String() + "/x", "timeout": 0.3},
		"body never read": {"url": "http://" + ln.Addr().String() + "/x", "timeout": 0.3, "method": "POST", "body": strings.Repeat("x", 16<<20)},
	} {
		out, err := tool.Execute(context.Background(), &tools.Call{Step: "fetch", Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != tools.StatusError || out.HTTP["timeout"] != true || !strings.Contains(out.Error, "timeout") {
			t.Errorf("%s: status %q http %v error %q, want a timeout", name, out.Status, out.HTTP, out.Error)
		}
	}
}

// endless streams zeros until the client leaves.
func endless(w nethttp.ResponseWriter, r *nethttp.Request) {
	chunk := make([]byte, 32<<10)
	for r.Context().Err() == nil {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// TestHugeBodies: a body without end, and a gzip body that expands far
// past the limit, stop at MaxBodyBytes with an error that says so; the
// output encodes as JSON.
func TestHugeBodies(t *testing.T) {
	t.Parallel()
	bomb := gzipBomb(16 << 20)
	mux := nethttp.NewServeMux()
	mux.HandleFunc("/endless", endless)
	mux.HandleFunc("/bomb", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "application/json")
		w.Write(bomb)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tool := cfhttp.New(cfhttp.Config{NoPacing: true, MaxBodyBytes: 1 << 20})
	for _, path := range []string{"/endless", "/bomb"} {
		out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"url": srv.URL + path}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != tools.StatusError || !strings.Contains(out.Error, "larger than") {
			t.Errorf("%s: status %q error %q", path, out.Status, out.Error)
		}
		if b, err := json.Marshal(out); err != nil || len(b) > 1<<20 {
			t.Errorf("%s: output of %d bytes, %v", path, len(b), err)
		}
	}
}

// TestHostileBodies: a JSON body nested a million deep and a body that is
// not UTF-8 give outputs that encode as valid JSON.
func TestHostileBodies(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000)
	mux := nethttp.NewServeMux()
	mux.HandleFunc("/deep", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, deep)
	})
	mux.HandleFunc("/latin1", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{\"name\": \"caf\xe9\", \"raw\": \"\x00\xff\"}"))
	})
	mux.HandleFunc("/binary", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Write([]byte("\x1f\x8b\x08\x00\xff\xfe\x00bin"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	for _, path := range []string{"/deep", "/latin1", "/binary"} {
		out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"url": srv.URL + path}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(out)
		if err != nil || !json.Valid(b) {
			t.Errorf("%s: output does not encode as JSON: %v", path, err)
		}
	}
}

// TestCompressedBodyAskedForByTheTask: a task that sets Accept-Encoding
// itself (as NoETL playbooks do: httpx decodes gzip and deflate whoever
// asked) gets the decoded body, not the compressed bytes; a gzip bomb it
// asked for stops at MaxBodyBytes of decoded body.
func TestCompressedBodyAskedForByTheTask(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	io.WriteString(zw, `{"ok": true, "n": 3}`)
	zw.Close()
	small := b.Bytes()
	bomb := gzipBomb(16 << 20)
	mux := nethttp.NewServeMux()
	mux.HandleFunc("/small", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "application/json")
		w.Write(small)
	})
	mux.HandleFunc("/bomb", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(bomb)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tool := cfhttp.New(cfhttp.Config{NoPacing: true, MaxBodyBytes: 1 << 20})
	call := func(path string) tools.Output {
		out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"url": srv.URL + path,
			"headers": map[string]any{"Accept-Encoding": "gzip, deflate"}}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := call("/small")
	data := out.Data.(map[string]any)["data"]
	if m, ok := data.(map[string]any); out.Status != tools.StatusSuccess || !ok || m["ok"] != true {
		t.Errorf("status %q data %#v, want the decoded JSON", out.Status, data)
	}
	out = call("/bomb")
	if out.Status != tools.StatusError || !strings.Contains(out.Error, "larger than") {
		t.Errorf("bomb: status %q error %q", out.Status, out.Error)
	}
}

// gzipBomb returns n zero bytes, gzipped: a small body that expands n-fold.
func gzipBomb(n int) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	zeros := make([]byte, 1<<20)
	for ; n > 0; n -= len(zeros) {
		zw.Write(zeros[:min(n, len(zeros))])
	}
	zw.Close()
	return b.Bytes()
}

// TestCutStreamHandsOnNoHalfRecord: an NDJSON stream that stalls halfway
// through a record until the timeout hands on its whole records as pages,
// never the fragment of the record it was cut in.
func TestCutStreamHandsOnNoHalfRecord(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"id":1}`+"\n"+`{"id":2,"na`)
		w.(nethttp.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	var mu sync.Mutex
	var pages []any
	out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"url": srv.URL, "timeout": 0.3},
		Partial: func(d any) {
			mu.Lock()
			pages = append(pages, d.(map[string]any)["data"])
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != tools.StatusError || out.HTTP["timeout"] != true {
		t.Errorf("status %q http %v, want a timeout", out.Status, out.HTTP)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pages) != 1 {
		t.Errorf("pages %v, want only the whole record", pages)
	}
}

// TestRevealedSecretNotFollowedToPlainHTTP: a secret a playbook put in the
// request is not sent again over plain http after a redirect from https,
// even to a host its entry allows: the redirect is the response.
func TestRevealedSecretNotFollowedToPlainHTTP(t *testing.T) {
	t.Parallel()
	a := newRecorder(t, true)
	b := newRecorder(t, false)
	revealed := []tools.Revealed{{Ref: "${secret:tok#token}", Secret: "tok-0123456789",
		Credential: tools.Credential{Alias: "tok", Hosts: []string{"127.0.0.1"}, Fields: map[string]string{"token": "tok-0123456789"}}}}
	tool := cfhttp.New(cfhttp.Config{Client: a.srv.Client(), NoPacing: true})
	out, err := tool.Execute(context.Background(), &tools.Call{Revealed: revealed, Config: map[string]any{
		"url": a.srv.URL + "/?to=" + url.QueryEscape(b.srv.URL+"/x"), "headers": map[string]any{"X-Token": "tok-0123456789"}}})
	if err != nil {
		t.Fatal(err)
	}
	if code := out.Data.(map[string]any)["status_code"]; code != nethttp.StatusFound {
		t.Errorf("status %v, want the redirect itself", code)
	}
	if hs := b.headers(); len(hs) != 0 {
		t.Errorf("plain http server got %d requests: %v", len(hs), hs)
	}
}

// TestEndlessBodyMemory: a body without end and without a declared length
// costs about MaxBodyBytes of memory before it is refused, not several
// times that (bytes.Buffer doubled to 4×: 256 MB per call at the default
// 64 MB cap). Not parallel: it reads the process's allocation count.
func TestEndlessBodyMemory(t *testing.T) {
	srv := httptest.NewServer(nethttp.HandlerFunc(endless))
	t.Cleanup(srv.Close)
	const limit = 16 << 20
	tool := cfhttp.New(cfhttp.Config{NoPacing: true, MaxBodyBytes: limit})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"url": srv.URL}})
	runtime.ReadMemStats(&after)
	if err != nil || !strings.Contains(out.Error, "larger than") {
		t.Fatalf("%v %q", err, out.Error)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > limit*3/2 {
		t.Errorf("allocated %d MB to refuse a body over %d MB", got>>20, limit>>20)
	}
}

// TestURLUserInfoIsACredential: a password in the URL's user info
// (https://user:pass@host) becomes the Basic authorization net/http
// sends; an endpoint that echoes its request headers must not put it,
// plain or base64-encoded, into the output (and so the event log), and
// a redirect to another origin does not carry it.
func TestURLUserInfoIsACredential(t *testing.T) {
	t.Parallel()
	b := newRecorder(t, false)
	bURL, _ := url.Parse(b.srv.URL)
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			nethttp.Redirect(w, r, to, nethttp.StatusFound)
			return
		}
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		user, pass, _ := r.BasicAuth()
		json.NewEncoder(w).Encode(map[string]any{"authorization": r.Header.Get("Authorization"), "user": user, "pass": pass})
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	const user, pass = "svc", "pw-0123456789"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})

	out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"url": "http://" + user + ":" + pass + "@" + host + "/echo"}})
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("%v %+v", err, out)
	}
	data := out.Data.(map[string]any)["data"].(map[string]any)
	if data["user"] != user {
		t.Fatalf("the server got no Basic authorization from the user info: %v", data)
	}
	dump, _ := json.Marshal(out)
	for _, s := range []string{pass, basic} {
		if strings.Contains(string(dump), s) {
			t.Errorf("output holds %q: %s", s, dump)
		}
	}

	// The same through a secret reference: what the worker records
	// (ConcealSecrets) holds no encoded form either.
	revealed := []tools.Revealed{{Ref: "${secret:svc#password}", Secret: pass,
		Credential: tools.Credential{Alias: "svc", Hosts: []string{"127.0.0.1"}, Fields: map[string]string{"password": pass}}}}
	out, err = tool.Execute(context.Background(), &tools.Call{Revealed: revealed,
		Config: map[string]any{"url": "http://" + user + ":" + pass + "@" + host + "/echo"}})
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("%v %+v", err, out)
	}
	dump, _ = json.Marshal(tools.ConcealSecrets(out.Data, revealed))
	for _, s := range []string{pass, basic} {
		if strings.Contains(string(dump), s) {
			t.Errorf("recorded output holds %q: %s", s, dump)
		}
	}

	// A redirect to another origin (another port) leaves it behind.
	out, err = tool.Execute(context.Background(), &tools.Call{Config: map[string]any{
		"url": "http://" + user + ":" + pass + "@" + host + "/?to=" + url.QueryEscape("http://127.0.0.1:"+bURL.Port()+"/x")}})
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("%v %+v", err, out)
	}
	noAuthorization(t, b.headers(), "user info credential")
}

// TestTruncatedBody: a body the connection drops before its end (a
// chunked body without its last chunk, a gzip stream cut short) is an
// error, never a shorter success.
func TestTruncatedBody(t *testing.T) {
	t.Parallel()
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	io.WriteString(zw, `{"rows": [`+strings.Repeat(`"row", `, 2000)+`"last"]}`)
	zw.Close()
	cut := zipped.Bytes()[:zipped.Len()/2]
	mux := nethttp.NewServeMux()
	mux.HandleFunc("/chunked", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		conn, buf, err := w.(nethttp.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
		buf.WriteString("a\r\n{\"rows\": \r\n") // and then the connection drops
		buf.Flush()
	})
	mux.HandleFunc("/gzip", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "application/json")
		w.Write(cut)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	for _, c := range []struct {
		path    string
		headers map[string]any
	}{
		{"/chunked", nil},
		{"/gzip", nil},
		{"/gzip", map[string]any{"Accept-Encoding": "gzip"}},
	} {
		out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"url": srv.URL + c.path, "headers": c.headers}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != tools.StatusError || !strings.Contains(out.Error, "EOF") {
			t.Errorf("%s %v: status %q error %q, want the truncation as an error", c.path, c.headers, out.Status, out.Error)
		}
	}
}

// TestRetryableSaysWhetherToSendAgain: data.retryable (policy rules'
// output.error.retryable) is true for a request that reached no server,
// whatever its method, and for a connection lost mid-body only when the
// method is idempotent; a certificate refused and a body over the size
// cap are not retryable.
func TestRetryableSaysWhetherToSendAgain(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/"
	ln.Close() // nothing listens there now
	mux := nethttp.NewServeMux()
	mux.HandleFunc("/cut", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		conn, buf, err := w.(nethttp.Hijacker).Hijack()
		if err != nil {
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"rows\": [")
		buf.Flush()
		conn.(*net.TCPConn).SetLinger(0) // a reset, not a FIN
		conn.Close()
	})
	mux.HandleFunc("/big", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Write(bytes.Repeat([]byte("x"), 4096))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tlsSrv := httptest.NewTLSServer(mux) // its certificate is not one the tool trusts
	t.Cleanup(tlsSrv.Close)
	tool := cfhttp.New(cfhttp.Config{NoPacing: true, MaxBodyBytes: 1024})
	for _, c := range []struct {
		what, method, url string
		want              bool
	}{
		{"refused GET", "GET", refused, true},
		{"refused POST", "POST", refused, true},
		{"cut GET", "GET", srv.URL + "/cut", true},
		{"cut PUT", "PUT", srv.URL + "/cut", true},
		{"cut POST", "POST", srv.URL + "/cut", false},
		{"cut PATCH", "PATCH", srv.URL + "/cut", false},
		{"untrusted certificate", "GET", tlsSrv.URL + "/big", false},
		{"over the size cap", "GET", srv.URL + "/big", false},
	} {
		out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"url": c.url, "method": c.method}})
		if err != nil {
			t.Fatal(err)
		}
		data, _ := out.Data.(map[string]any)
		if out.Status != tools.StatusError || data["retryable"] != c.want {
			t.Errorf("%s: status %q retryable %v (%s), want an error with retryable %v", c.what, out.Status, data["retryable"], out.Error, c.want)
		}
	}
}
