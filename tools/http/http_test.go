package http_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/tools"
	cfhttp "github.com/cursorflow/cursorflow/tools/http"
)

// echo answers every request with a JSON description of it, except the
// paths that exercise statuses and delays.
func echo(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(500)
			io.WriteString(w, `{"detail":"database exploded"}`)
			return
		case "/text":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "plain words")
			return
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		case "/redirect":
			nethttp.Redirect(w, r, "/text", nethttp.StatusFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo", "yes")
		json.NewEncoder(w).Encode(map[string]any{
			"method":       r.Method,
			"query":        r.URL.RawQuery,
			"content_type": r.Header.Get("Content-Type"),
			"authz":        r.Header.Get("Authorization"),
			"custom":       r.Header.Get("X-Custom"),
			"body":         string(body),
			"id":           int64(9007199254740993),
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestExecute(t *testing.T) {
	t.Parallel()
	srv := echo(t)
	tool := cfhttp.New(cfhttp.Config{})
	kc := tools.StaticKeychain{"api": {URL: srv.URL, Fields: map[string]string{"token": "s3cret"}}}

	tests := []struct {
		name   string
		config map[string]any
		status string
		check  func(t *testing.T, out tools.Output, echoed map[string]any)
	}{
		{
			name:   "get with params formatted like python",
			config: map[string]any{"url": srv.URL + "/e?x=1", "params": map[string]any{"page": 1.0, "size": "25", "ratio": 0.5, "on": true, "skip": nil, "tag": []any{"a", "b"}}},
			status: tools.StatusSuccess,
			check: func(t *testing.T, out tools.Output, e map[string]any) {
				if got, want := e["query"], "on=true&page=1&ratio=0.5&size=25&tag=a&tag=b&x=1"; got != want {
					t.Errorf("query = %q, want %q", got, want)
				}
				if e["method"] != "GET" {
					t.Errorf("method = %v", e["method"])
				}
				if e["id"] != int64(9007199254740993) {
					t.Errorf("large id lost precision: %#v", e["id"])
				}
			},
		},
		{
			name:   "post json",
			config: map[string]any{"method": "post", "url": srv.URL, "json": map[string]any{"a": 1}},
			status: tools.StatusSuccess,
			check: func(t *testing.T, out tools.Output, e map[string]any) {
				if e["body"] != `{"a":1}` || e["content_type"] != "application/json" {
					t.Errorf("body %q content type %q", e["body"], e["content_type"])
				}
			},
		},
		{
			name:   "noetl data map is the body of a post",
			config: map[string]any{"method": "POST", "url": srv.URL, "data": map[string]any{"k": "v"}},
			status: tools.StatusSuccess,
			check: func(t *testing.T, out tools.Output, e map[string]any) {
				if e["body"] != `{"k":"v"}` {
					t.Errorf("body %q", e["body"])
				}
			},
		},
		{
			name:   "noetl data map is the query of a get",
			config: map[string]any{"url": srv.URL, "data": map[string]any{"k": 2.0}},
			status: tools.StatusSuccess,
			check: func(t *testing.T, out tools.Output, e map[string]any) {
				if e["query"] != "k=2" || e["body"] != "" {
					t.Errorf("query %q body %q", e["query"], e["body"])
				}
			},
		},
		{
			name:   "data with explicit query and body",
			config: map[string]any{"method": "PUT", "url": srv.URL, "data": map[string]any{"query": map[string]any{"q": "x"}, "body": []any{1.0, 2.0}}},
			status: tools.StatusSuccess,
			check: func(t *testing.T, out tools.Output, e map[string]any) {
				if e["query"] != "q=x" || e["body"] != "[1,2]" {
					t.Errorf("query %q body %q", e["query"], e["body"])
				}
			},
		},
		{
			name:   "raw string body",
			config: map[string]any{"method": "POST", "url": srv.URL, "body": "raw<>text", "headers": map[string]any{"Content-Type": "text/plain", "X-Custom": 7.0}},
			status: tools.StatusSuccess,
			check: func(t *testing.T, out tools.Output, e map[string]any) {
				if e["body"] != "raw<>text" || e["content_type"] != "text/plain" || e["custom"] != "7" {
					t.Errorf("echo %v", e)
				}
			},
		},
		{
			name:   "form body",
			config: map[string]any{"method": "POST", "url": srv.URL, "form": map[string]any{"a": "1 2", "b": false}},
			status: tools.StatusSuccess,
			check: func(t *testing.T, out tools.Output, e map[string]any) {
				if e["body"] != "a=1+2&b=false" || e["content_type"] != "application/x-www-form-urlencoded" {
					t.Errorf("echo %v", e)
				}
			},
		},
		{
			name:   "bearer token from keychain, redacted from the echo",
			config: map[string]any{"url": srv.URL, "auth": "api"},
			status: tools.StatusSuccess,
			check: func(t *testing.T, out tools.Output, e map[string]any) {
				if e["authz"] != "Bearer "+tools.Redacted {
					t.Errorf("authorization %q", e["authz"])
				}
			},
		},
		{
			name:   "non-2xx keeps data",
			config: map[string]any{"url": srv.URL + "/fail"},
			status: tools.StatusError,
			check: func(t *testing.T, out tools.Output, _ map[string]any) {
				if out.Error != `HTTP 500: {"detail":"database exploded"}` {
					t.Errorf("error %q", out.Error)
				}
				d := out.Data.(map[string]any)
				if d["status_code"] != 500 || d["data"].(map[string]any)["detail"] != "database exploded" {
					t.Errorf("data %v", d)
				}
				if out.HTTP["status"] != 500 {
					t.Errorf("http %v", out.HTTP)
				}
			},
		},
		{
			name:   "text body stays a string",
			config: map[string]any{"url": srv.URL + "/text"},
			status: tools.StatusSuccess,
			check: func(t *testing.T, out tools.Output, _ map[string]any) {
				d := out.Data.(map[string]any)
				if d["data"] != "plain words" || d["headers"].(map[string]any)["content-type"] != "text/plain" {
					t.Errorf("data %v", d)
				}
			},
		},
		{
			name:   "redirect not followed when disabled",
			config: map[string]any{"url": srv.URL + "/redirect", "follow_redirects": false},
			status: tools.StatusError,
			check: func(t *testing.T, out tools.Output, _ map[string]any) {
				if out.Data.(map[string]any)["status_code"] != 302 {
					t.Errorf("data %v", out.Data)
				}
			},
		},
		{
			name:   "redirect followed by default",
			config: map[string]any{"url": srv.URL + "/redirect"},
			status: tools.StatusSuccess,
			check: func(t *testing.T, out tools.Output, _ map[string]any) {
				if out.Data.(map[string]any)["data"] != "plain words" {
					t.Errorf("data %v", out.Data)
				}
			},
		},
		{
			name:   "timeout is an error output",
			config: map[string]any{"url": srv.URL + "/slow", "timeout": 0.2},
			status: tools.StatusError,
			check: func(t *testing.T, out tools.Output, _ map[string]any) {
				if !strings.Contains(out.Error, "timeout after 200ms") {
					t.Errorf("error %q", out.Error)
				}
				if out.Data.(map[string]any)["status_code"] != 0 {
					t.Errorf("data %v", out.Data)
				}
			},
		},
		{
			name:   "connection refused is an error output",
			config: map[string]any{"url": "http://127.0.0.1:1/x"},
			status: tools.StatusError,
			check: func(t *testing.T, out tools.Output, _ map[string]any) {
				if !strings.Contains(out.Error, "refused") {
					t.Errorf("error %q", out.Error)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := tool.Execute(context.Background(), &tools.Call{Kind: "http", Config: tt.config, Keychain: kc})
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if out.Status != tt.status {
				t.Fatalf("status = %q (error %q), want %q", out.Status, out.Error, tt.status)
			}
			var echoed map[string]any
			if d, ok := out.Data.(map[string]any); ok {
				echoed, _ = d["data"].(map[string]any)
			}
			tt.check(t, out, echoed)
		})
	}
}

// TestTimeoutOfTheCaller: when the caller's deadline (a step's or task's
// spec.timeout) ends a request before the tool's own timeout, the error
// does not name the tool's timeout, which is not what ran out: a step with
// spec.timeout 1 said "timeout after 30s".
func TestTimeoutOfTheCaller(t *testing.T) {
	t.Parallel()
	srv := echo(t)
	tool := cfhttp.New(cfhttp.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	out, err := tool.Execute(ctx, &tools.Call{Kind: "http", Config: map[string]any{"url": srv.URL + "/slow"}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if out.Status != tools.StatusError || out.HTTP["timeout"] != true {
		t.Fatalf("status %q http %v, want a timeout", out.Status, out.HTTP)
	}
	if strings.Contains(out.Error, cfhttp.DefaultTimeout.String()) || !strings.Contains(out.Error, "deadline") {
		t.Errorf("error %q, want the caller's deadline, not the tool's %s", out.Error, cfhttp.DefaultTimeout)
	}
}

func TestExecuteConfigErrors(t *testing.T) {
	t.Parallel()
	tool := cfhttp.New(cfhttp.Config{})
	tests := []struct {
		name   string
		config map[string]any
		is     error
	}{
		{"missing url", map[string]any{}, cfhttp.ErrBadConfig},
		{"relative url", map[string]any{"url": "/x"}, cfhttp.ErrBadConfig},
		{"bad timeout", map[string]any{"url": "http://x", "timeout": "soon"}, cfhttp.ErrBadConfig},
		{"unknown alias", map[string]any{"url": "http://x", "auth": "nope"}, tools.ErrCredentialNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tool.Execute(context.Background(), &tools.Call{Config: tt.config, Keychain: tools.StaticKeychain{}})
			if !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want %v", err, tt.is)
			}
		})
	}
}

func BenchmarkGet(b *testing.B) {
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"items":[1,2,3]}`)
	}))
	defer srv.Close()
	tool := cfhttp.New(cfhttp.Config{})
	call := &tools.Call{Config: map[string]any{"url": srv.URL + "/x", "params": map[string]any{"id": 1.0}}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, err := tool.Execute(context.Background(), call)
			if err != nil || out.Status != tools.StatusSuccess {
				b.Fatalf("%v %v", err, out.Error)
			}
		}
	})
}

// TestCredentialHosts sends credentials only where their keychain entry
// allows, also across a redirect, and redacts what an endpoint echoes.
func TestCredentialHosts(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string][]string{} // server → credential headers it received
	record := func(name string) nethttp.HandlerFunc {
		return func(w nethttp.ResponseWriter, r *nethttp.Request) {
			mu.Lock()
			seen[name] = append(seen[name], r.Header.Get("Authorization")+"|"+r.Header.Get("X-API-Key"))
			mu.Unlock()
			if to := r.URL.Query().Get("to"); to != "" {
				nethttp.Redirect(w, r, to, nethttp.StatusFound)
				return
			}
			// Echo the request headers back, in the body and as a header.
			w.Header().Set("X-Seen-Auth", r.Header.Get("Authorization")+r.Header.Get("X-API-Key"))
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"headers": r.Header, "note": "token is " + r.Header.Get("Authorization")})
		}
	}
	a := httptest.NewServer(record("a")) // reached as 127.0.0.1
	t.Cleanup(a.Close)
	b := httptest.NewServer(record("b")) // reached as localhost: another host
	t.Cleanup(b.Close)
	aURL, _ := url.Parse(a.URL)
	bURL, _ := url.Parse(b.URL)
	bLocal := "http://localhost:" + bURL.Port()

	kc := tools.StaticKeychain{
		"scoped":  {Hosts: []string{"127.0.0.1"}, Fields: map[string]string{"api_key": "key-0123456789"}},
		"by_url":  {URL: a.URL, Fields: map[string]string{"token": "tok-0123456789"}},
		"nowhere": {Fields: map[string]string{"token": "tok-nowhere-99"}},
		"wild":    {Hosts: []string{"*.example.com"}, Fields: map[string]string{"token": "tok-wild-12345"}},
		"basic":   {Hosts: []string{aURL.Host}, Fields: map[string]string{"username": "u", "password": "pw-0123456789"}},
	}
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	call := func(alias, target string) (tools.Output, error) {
		return tool.Execute(context.Background(), &tools.Call{Keychain: kc, Config: map[string]any{"url": target, "auth": alias}})
	}
	for _, tt := range []struct{ alias, target string }{
		{"scoped", bLocal},
		{"by_url", bLocal},
		{"nowhere", a.URL},
		{"wild", a.URL},
	} {
		if _, err := call(tt.alias, tt.target); !errors.Is(err, tools.ErrHostNotAllowed) {
			t.Errorf("%s to %s: err %v, want ErrHostNotAllowed", tt.alias, tt.target, err)
		}
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Fatalf("refused calls reached servers: %v", seen)
	}
	mu.Unlock()

	// Allowed host, then a redirect to another host: the API key stays behind.
	out, err := call("scoped", a.URL+"/?to="+url.QueryEscape(bLocal+"/landed"))
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("scoped call: %v %+v", err, out)
	}
	mu.Lock()
	if got := seen["a"]; len(got) != 1 || got[0] != "|key-0123456789" {
		t.Errorf("allowed host got %q", got)
	}
	if got := seen["b"]; len(got) != 1 || got[0] != "|" {
		t.Errorf("redirect target got credential headers %q", got)
	}
	mu.Unlock()

	for _, alias := range []string{"by_url", "basic", "scoped"} {
		out, err := call(alias, a.URL+"/echo")
		if err != nil || out.Status != tools.StatusSuccess {
			t.Fatalf("%s: %v %+v", alias, err, out)
		}
		dump, _ := json.Marshal(out)
		for _, secret := range []string{"tok-0123456789", "pw-0123456789", "key-0123456789", "dTpwdy0wMTIzNDU2Nzg5"} {
			if strings.Contains(string(dump), secret) {
				t.Errorf("%s: the response put secret %q into the output: %s", alias, secret, dump)
			}
		}
		if !strings.Contains(string(dump), tools.Redacted) {
			t.Errorf("%s: nothing redacted in %s", alias, dump)
		}
	}
}

// TestRevealedSecretsStayScoped: a secret a playbook put into a request
// through a secret reference goes only where its keychain entry allows,
// and a redirect elsewhere is not followed.
func TestRevealedSecretsStayScoped(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		mu.Lock()
		got = append(got, r.Host+" "+r.Header.Get("X-Token"))
		mu.Unlock()
		if to := r.URL.Query().Get("to"); to != "" {
			nethttp.Redirect(w, r, to, nethttp.StatusFound)
		}
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	local := "http://localhost:" + u.Port()
	revealed := []tools.Revealed{{Ref: "${secret:tok#token}", Secret: "tok-0123456789",
		Credential: tools.Credential{Alias: "tok", Hosts: []string{"127.0.0.1"}, Fields: map[string]string{"token": "tok-0123456789"}}}}
	tool := cfhttp.New(cfhttp.Config{NoPacing: true})
	call := func(target string) (tools.Output, error) {
		return tool.Execute(context.Background(), &tools.Call{Revealed: revealed,
			Config: map[string]any{"url": target, "headers": map[string]any{"X-Token": "tok-0123456789"}}})
	}
	if _, err := call(local + "/"); !errors.Is(err, tools.ErrHostNotAllowed) {
		t.Fatalf("to a host the entry does not list: %v", err)
	}
	out, err := call(srv.URL + "/?to=" + url.QueryEscape(local+"/landed"))
	if err != nil {
		t.Fatal(err)
	}
	if code := out.Data.(map[string]any)["status_code"]; code != nethttp.StatusFound {
		t.Fatalf("the redirect to another host was followed: status %v", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || !strings.HasPrefix(got[0], "127.0.0.1:") {
		t.Fatalf("requests seen: %q", got)
	}
}

// TestStreamedPages: the records of a streamed body (NDJSON, server-sent
// events) reach the call's Partial receiver while the body still arrives:
// the server sends the second record only after the test saw the first.
func TestStreamedPages(t *testing.T) {
	t.Parallel()
	first := make(chan struct{})
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		switch r.URL.Path {
		case "/ndjson":
			w.Header().Set("Content-Type", "application/x-ndjson")
			io.WriteString(w, `{"page":1,"token":"sekrit-token"}`+"\n")
			w.(nethttp.Flusher).Flush()
			select {
			case <-first:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "\n"+`{"page":2}`+"\nnot json")
		case "/sse":
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			io.WriteString(w, "event: tick\ndata: {\"n\":1}\n\n: comment\ndata: bye\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"rows":[1,2]}`)
		}
	}))
	t.Cleanup(srv.Close)
	tool := cfhttp.New(cfhttp.Config{})
	kc := tools.StaticKeychain{"api": {Alias: "api", Hosts: []string{"127.0.0.1"}, Fields: map[string]string{"token": "sekrit-token"}}}
	run := func(path string, onPage func(map[string]any)) ([]map[string]any, tools.Output) {
		var got []map[string]any
		out, err := tool.Execute(context.Background(), &tools.Call{
			Config:   map[string]any{"url": srv.URL + path, "auth": "api"},
			Keychain: kc,
			Partial: func(d any) {
				m := d.(map[string]any)
				got = append(got, m)
				if onPage != nil {
					onPage(m)
				}
			},
		})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return got, out
	}
	got, out := run("/ndjson", func(m map[string]any) {
		if m["page"] == 1 {
			close(first)
		}
	})
	if out.Status != tools.StatusSuccess || len(got) != 3 {
		t.Fatalf("ndjson: status %s, %d pages: %v", out.Status, len(got), got)
	}
	if d := got[0]["data"].(map[string]any); d["token"] != tools.Redacted {
		t.Fatalf("a page carries the credential's secret: %v", d)
	}
	if got[1]["page"] != 2 || got[1]["data"].(map[string]any)["page"] != int64(2) || got[2]["data"] != "not json" {
		t.Fatalf("ndjson pages: %v", got)
	}
	got, _ = run("/sse", nil)
	if len(got) != 2 || got[0]["data"].(map[string]any)["n"] != int64(1) || got[1]["data"] != "bye" {
		t.Fatalf("sse pages: %v", got)
	}
	if got, _ = run("/json", nil); len(got) != 0 {
		t.Fatalf("a plain JSON body is not streamed, yet: %v", got)
	}
}

// TestEchoedQuerySecretRedacted: a secret sent as a query parameter comes
// back percent-encoded from an endpoint that echoes its request (or in a
// next-page link); once concealed, as the worker records it, the output
// holds no form of it, only its reference.
func TestEchoedQuerySecretRedacted(t *testing.T) {
	t.Parallel()
	const token = "dGhpc2lzYXNlY3JldA+/k==" // base64: '+', '/' and '=' escape in a URL
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"path": r.URL.RequestURI(), "next": "/page/2/" + url.PathEscape(r.URL.Query().Get("api_key"))})
	}))
	t.Cleanup(srv.Close)
	revealed := []tools.Revealed{{Ref: "${secret:api#token}", Secret: token,
		Credential: tools.Credential{Alias: "api", Hosts: []string{"127.0.0.1"}, Fields: map[string]string{"token": token}}}}
	out, err := cfhttp.New(cfhttp.Config{NoPacing: true}).Execute(context.Background(), &tools.Call{Revealed: revealed,
		Config: map[string]any{"url": srv.URL + "/json", "params": map[string]any{"api_key": token}}})
	if err != nil {
		t.Fatal(err)
	}
	// What the worker records: the output with the revealed secrets
	// concealed again.
	b, err := json.Marshal(tools.ConcealSecrets(out.Data, revealed))
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{token, url.QueryEscape(token), url.PathEscape(token)} {
		if strings.Contains(string(b), form) {
			t.Errorf("the output holds the secret as %q: %s", form, b)
		}
	}
	if !strings.Contains(string(b), "/json?api_key=${secret:api#token}") {
		t.Fatalf("the echo did not come back with the reference: %s", b)
	}
}

// TestDeclaredOversizedBodyRefusedUnread: a response whose Content-Length
// is past MaxBodyBytes fails at once, without reading the body. Before,
// the tool read up to the cap first (and held that much memory), here
// waiting for a body the server never sends, until the call's timeout.
func TestDeclaredOversizedBodyRefusedUnread(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Length", "1048576")
		w.WriteHeader(nethttp.StatusOK)
		w.(nethttp.Flusher).Flush()
		<-r.Context().Done() // the body never comes
	}))
	t.Cleanup(srv.Close)
	tool := cfhttp.New(cfhttp.Config{MaxBodyBytes: 1024, Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := tool.Execute(ctx, &tools.Call{Kind: "http", Config: map[string]any{"url": srv.URL}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if out.Status != tools.StatusError || !strings.Contains(out.Error, "response body of 1048576 bytes is larger than 1024 bytes") {
		t.Fatalf("status %q error %q, want the declared body refused", out.Status, out.Error)
	}
}
