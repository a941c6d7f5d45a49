package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The server refuses to start with an open API unless told --insecure,
// and says how to give it a token; it never gets as far as the database.
func TestRefusesToStartWithoutToken(t *testing.T) {
	t.Setenv(envAPIToken, "")
	t.Setenv(envCLIToken, "")
	var stderr bytes.Buffer
	code := run([]string{"--eventlog", "postgres://127.0.0.1:1/none"}, &stderr)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr: %s", code, &stderr)
	}
	for _, want := range []string{"no API token", "--token-file", "--insecure"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q does not mention %s", stderr.String(), want)
		}
	}
}

func TestTokenFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	blank := filepath.Join(t.TempDir(), "blank")
	if err := os.WriteFile(blank, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		o         options
		env       string
		cliEnv    string // CURSORFLOW_TOKEN, the CLI's name
		wantToken string
		wantErr   string
	}{
		{name: "token", o: options{token: "t"}, wantToken: "t"},
		{name: "file, trimmed", o: options{tokenFile: file}, wantToken: "s3cret"},
		{name: "environment", env: "from-env", wantToken: "from-env"},
		// A secret mounted as an environment variable often ends in a
		// newline; presented tokens are trimmed, so this one must be.
		{name: "environment, trimmed", env: "from-env\n", wantToken: "from-env"},
		{name: "token, trimmed", o: options{token: " t\r\n"}, wantToken: "t"},
		{name: "the CLI's variable", cliEnv: "from-cli-env\n", wantToken: "from-cli-env"},
		{name: "the server's variable first", env: "api", cliEnv: "cli", wantToken: "api"},
		{name: "blank token", o: options{token: " \n"}, wantErr: "--token holds only white space"},
		{name: "blank environment", env: "\n", wantErr: envAPIToken + " holds only white space"},
		{name: "blank file", o: options{tokenFile: blank}, wantErr: "holds only white space"},
		{name: "blank token, insecure", o: options{token: "\n", insecure: true}, wantErr: "holds only white space"},
		{name: "insecure", o: options{insecure: true}},
		{name: "none", wantErr: "no API token"},
		{name: "insecure with a token", o: options{insecure: true, token: "t"}, wantErr: "--insecure with a token"},
		{name: "insecure with the environment's token", o: options{insecure: true}, env: "e", wantErr: "--insecure with a token"},
		{name: "both flags", o: options{token: "t", tokenFile: file}, wantErr: "exclude each other"},
		{name: "missing file", o: options{tokenFile: file + ".missing"}, wantErr: "--token-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envAPIToken, tc.env)
			t.Setenv(envCLIToken, tc.cliEnv)
			o := tc.o
			err := o.resolveToken()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || o.token != tc.wantToken {
				t.Fatalf("token %q, err %v; want %q", o.token, err, tc.wantToken)
			}
		})
	}
}

// Without --listen the server binds the loopback interface only.
func TestListensOnLoopbackByDefault(t *testing.T) {
	host, _, err := net.SplitHostPort(DefaultListen)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Fatalf("default listen address %q is not a loopback address", DefaultListen)
	}
	var stderr bytes.Buffer
	run([]string{"-h"}, &stderr)
	if !strings.Contains(stderr.String(), DefaultListen) {
		t.Fatalf("usage does not show the default %s:\n%s", DefaultListen, &stderr)
	}
}

// TestStalledBodyTimesOut: a client that announces a body and stalls is
// answered and let go once the body's deadline passes, whatever the
// handler does (here it reads the body, as the API's handlers do); a
// request without a body gets no deadline.
func TestStalledBodyTimesOut(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(bodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}), 200*time.Millisecond))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", res.StatusCode)
	}
	res, err = http.Get(srv.URL)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("a request without a body: %v %v", res, err)
	}
	res.Body.Close()
}

// TestLargeHeadersRefused: request headers are read before any token is
// checked, so their bound is what an unauthenticated client may make the
// server hold per connection. net/http's default (1 MiB) let 400 such
// connections hold 550 MB; the API needs a token and a cookie, so
// headers over maxHeaderBytes get 431.
func TestLargeHeadersRefused(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Close()
		<-done
	}()
	url := "http://" + ln.Addr().String() + "/"
	get := func(pad int) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Pad", strings.Repeat("a", pad))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("header of %d bytes: %v", pad, err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := get(16 << 10); code != http.StatusOK {
		t.Fatalf("a 16 KiB header: status %d, want 200", code)
	}
	if code := get(256 << 10); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 256 KiB header: status %d, want 431", code)
	}
}
