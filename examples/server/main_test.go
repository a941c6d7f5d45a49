package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The server refuses to start with an open API unless told --insecure,
// and says how to give it a token; it never gets as far as the database.
func TestRefusesToStartWithoutToken(t *testing.T) {
	t.Setenv("CURSORFLOW_API_TOKEN", "")
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
	for _, tc := range []struct {
		name      string
		o         options
		env       string
		wantToken string
		wantErr   string
	}{
		{name: "token", o: options{token: "t"}, wantToken: "t"},
		{name: "file, trimmed", o: options{tokenFile: file}, wantToken: "s3cret"},
		{name: "environment", env: "from-env", wantToken: "from-env"},
		{name: "insecure", o: options{insecure: true}},
		{name: "none", wantErr: "no API token"},
		{name: "insecure with a token", o: options{insecure: true, token: "t"}, wantErr: "--insecure with a token"},
		{name: "insecure with the environment's token", o: options{insecure: true}, env: "e", wantErr: "--insecure with a token"},
		{name: "both flags", o: options{token: "t", tokenFile: file}, wantErr: "exclude each other"},
		{name: "missing file", o: options{tokenFile: file + ".missing"}, wantErr: "--token-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CURSORFLOW_API_TOKEN", tc.env)
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
