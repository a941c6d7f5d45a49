package api_test

import (
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/engine/api"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestPlaybookFileNameBounded: the file name a client gives its playbook
// source ("file", used in file:line:col messages) was logged and recorded
// in the execution as sent, a megabyte of it, control characters and
// all, by anyone with a token. A name longer than MaxPlaybookFile, or
// holding control characters, is now refused with a 400 that names the
// field and does not echo the name, and nothing is started or logged;
// a name at the limit starts the execution and is kept whole.
func TestPlaybookFileNameBounded(t *testing.T) {
	t.Parallel()
	var logs testenv.SyncBuffer
	b := setup(t, func(c *api.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	huge := strings.Repeat("a", 1<<20)
	for name, file := range map[string]string{
		"a megabyte":        huge,
		"one past":          strings.Repeat("b", api.MaxPlaybookFile+1),
		"a newline":         "x.yaml\nlevel=ERROR msg=forged",
		"an escape":         "\x1b[2J\x1b[31mx.yaml",
		"a NUL":             "x\x00.yaml",
		"a carriage return": "x.yaml\rok",
	} {
		r := b.do(t, http.MethodPost, "/v1/executions", api.StartRequest{Source: echoPlaybook, File: file})
		if r.status != http.StatusBadRequest {
			t.Fatalf("file with %s: status %d, want 400: %s", name, r.status, r.body)
		}
		e := r.errorBody(t)
		if !strings.Contains(e.Error, `"file"`) {
			t.Errorf("file with %s: %q does not name the field", name, e.Error)
		}
		if len(r.body) > 1024 {
			t.Errorf("file with %s: a %d-byte answer echoes the name", name, len(r.body))
		}
		if len(file) > api.MaxPlaybookFile && !strings.Contains(e.Error, strconv.Itoa(api.MaxPlaybookFile)) {
			t.Errorf("file with %s: %q does not say the limit", name, e.Error)
		}
		// Registering takes the name as a query parameter.
		if len(file) < 8<<10 {
			r = b.do(t, http.MethodPost, "/v1/playbooks?file="+url.QueryEscape(file), echoPlaybook)
			want(t, r, http.StatusBadRequest)
			if e := r.errorBody(t); !strings.Contains(e.Error, "file") {
				t.Errorf("register, file with %s: %q does not name the parameter", name, e.Error)
			}
		}
	}
	if strings.Contains(logs.String(), "execution started") || strings.Contains(logs.String(), huge[:4096]) ||
		strings.Contains(logs.String(), "\x1b") || strings.Contains(logs.String(), "level=ERROR msg=forged") {
		t.Fatalf("refused file names reached the log:\n%.2000q", logs.String())
	}

	atLimit := strings.Repeat("c", api.MaxPlaybookFile-len(".yaml")) + ".yaml"
	r := b.do(t, http.MethodPost, "/v1/executions", api.StartRequest{Source: echoPlaybook, File: atLimit})
	want(t, r, http.StatusCreated)
	var started api.Started
	r.decode(t, &started)
	r = b.do(t, http.MethodGet, "/v1/executions/"+started.ExecutionID+"/playbook", nil)
	want(t, r, http.StatusOK)
	var pb api.ExecutionPlaybook
	r.decode(t, &pb)
	if pb.File != atLimit {
		t.Fatalf("file recorded as %d bytes %.40q, want the %d bytes sent", len(pb.File), pb.File, len(atLimit))
	}
}
