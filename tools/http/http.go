package http

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	nethttp "net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/internal/jsonnum"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/internal/conv"
	"github.com/cursorflow/cursorflow/tools/internal/proc"
)

// Defaults of Config.
const (
	// DefaultTimeout bounds one request when the task sets no timeout.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxBodyBytes caps how much of a response body is read.
	DefaultMaxBodyBytes = 64 << 20
	// ErrorBodyBytes is how much of a non-2xx body Output.Error quotes.
	ErrorBodyBytes = 256
)

// Config configures the http tool.
type Config struct {
	// Client sends every request. Defaults to NewClient(). Its Timeout
	// should be zero: the tool bounds each request with a context instead.
	Client *nethttp.Client
	// Timeout bounds a request whose task sets no timeout. Defaults to
	// DefaultTimeout.
	Timeout time.Duration
	// MaxBodyBytes caps the response body read; a longer body is an
	// error. Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Keychain resolves auth aliases when a Call carries no Keychain.
	// Optional.
	Keychain tools.Keychain
	// Logger receives debug lines when a Call carries no Logger. Defaults
	// to slog.Default().
	Logger *slog.Logger
	// NoPacing turns off pacing after 429 answers (see pace.go): by
	// default, once a host answers 429 Too Many Requests, the tool learns
	// how many requests the host admits per window and spaces requests to
	// that host so they stay under it.
	NoPacing bool
}

// Tool is the http tool. Create it with New; it is safe for concurrent use.
type Tool struct {
	cfg        Config
	client     *nethttp.Client
	noRedirect *nethttp.Client
	pace       *pacer
}

// NewClient returns an *http.Client whose Transport is tuned for a flow
// that calls the same few hosts hundreds of times a second: many idle
// connections kept per host, HTTP/2 when offered, no client-wide timeout.
func NewClient() *nethttp.Client {
	tr := nethttp.DefaultTransport.(*nethttp.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 256
	tr.IdleConnTimeout = 90 * time.Second
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.ForceAttemptHTTP2 = true
	return &nethttp.Client{Transport: tr}
}

// New returns the http tool.
func New(cfg Config) *Tool {
	if cfg.Client == nil {
		cfg.Client = NewClient()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	noRedirect := *cfg.Client
	noRedirect.CheckRedirect = func(*nethttp.Request, []*nethttp.Request) error { return nethttp.ErrUseLastResponse }
	t := &Tool{cfg: cfg, client: cfg.Client, noRedirect: &noRedirect}
	if !cfg.NoPacing {
		t.pace = newPacer()
	}
	return t
}

// ErrBadConfig is wrapped by the errors Execute returns for a task whose
// configuration cannot make a request (no url, unreadable timeout, ...).
var ErrBadConfig = errors.New("http: bad task configuration")

// TakesSecrets implements tools.SecretTaker: the tool sends a revealed
// secret only to the hosts its keychain entry allows, also across
// redirects, and redacts it from the response.
func (t *Tool) TakesSecrets() bool { return true }

// ConfigKeys implements tools.ConfigKeyLister: the keys of the package doc,
// aliases included.
func (t *Tool) ConfigKeys() []string {
	return []string{"method", "url", "endpoint", "params", "headers", "data", "json", "body", "payload", "form", "timeout", "timeout_seconds", "follow_redirects", "auth", "credential", "credentials"}
}

// ConfigSynonyms implements tools.ConfigSynonymLister: of each group the
// request takes the first key set (a data: that is not {query} alone is
// the body before all of json, body, payload and form).
func (t *Tool) ConfigSynonyms() [][]string {
	return [][]string{{"url", "endpoint"}, {"json", "body", "payload", "form"}, {"timeout", "timeout_seconds"}, tools.AliasKeys()}
}

// Execute sends the request the task describes. Transport failures,
// timeouts and non-2xx responses are Outputs with Status "error"; only a
// configuration that cannot make a request or an unknown auth alias is a
// returned error.
func (t *Tool) Execute(ctx context.Context, call *tools.Call) (tools.Output, error) {
	cfg := call.Config
	req, cred, authHeaders, timeout, follow, err := t.build(ctx, call)
	if err != nil {
		return tools.Output{}, err
	}
	start := time.Now()
	callerDeadline, bounded := ctx.Deadline()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req = req.WithContext(ctx)

	client := t.client
	if !follow {
		client = t.noRedirect
	} else if cred != nil || len(call.Revealed) > 0 {
		client = t.guardRedirects(cred, authHeaders, call.Revealed)
	}
	host := req.URL.Host
	if t.pace != nil {
		if err := t.pace.acquire(ctx, host); err != nil {
			return noResponse(ctx, err, fmt.Sprintf("%s %s: waiting for the host's rate limit: %v", req.Method, redactURL(req.URL), err)), nil
		}
	}
	resp, err := client.Do(req)
	if t.pace != nil {
		if err != nil {
			t.pace.release(host, 0, "")
		} else {
			t.pace.release(host, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if err != nil {
		msg := err.Error()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			msg = fmt.Sprintf("%s %s: timeout after %s", req.Method, redactURL(req.URL), timeout)
			if bounded && callerDeadline.Before(start.Add(timeout)) {
				// The caller's deadline (a spec.timeout) came first:
				// the tool's own timeout is not what ran out.
				msg = fmt.Sprintf("%s %s: no response before the caller's deadline (%s)", req.Method, redactURL(req.URL),
					callerDeadline.Sub(start).Round(time.Millisecond))
			}
		}
		if cred != nil {
			msg = tools.Redact(msg, *cred)
		}
		return noResponse(ctx, err, msg), nil
	}
	defer resp.Body.Close()

	bodyReader := io.LimitReader(resp.Body, t.cfg.MaxBodyBytes+1)
	pages := streamedPages(call, resp.Header.Get("Content-Type"), cred)
	if pages != nil {
		bodyReader = io.TeeReader(bodyReader, pages)
	}
	var body []byte
	if resp.ContentLength > t.cfg.MaxBodyBytes {
		// Refused unread: reading up to the cap first would only hold
		// that much memory (and wait that long) for an error.
		err = fmt.Errorf("response body of %d bytes is larger than %d bytes", resp.ContentLength, t.cfg.MaxBodyBytes)
	} else {
		var buf bytes.Buffer
		if resp.ContentLength > 0 {
			// Room for the whole body and the read that meets its end,
			// so the buffer is not grown (doubled) as it fills.
			buf.Grow(int(resp.ContentLength) + bytes.MinRead)
		}
		_, err = buf.ReadFrom(bodyReader)
		body = buf.Bytes()
	}
	if pages != nil {
		pages.Flush()
	}
	if err == nil && int64(len(body)) > t.cfg.MaxBodyBytes {
		err = fmt.Errorf("response body larger than %d bytes", t.cfg.MaxBodyBytes)
	}
	headers := flattenHeaders(resp.Header)
	if err != nil {
		if cred != nil {
			headers = tools.RedactValue(headers, *cred).(map[string]any)
		}
		msg := fmt.Sprintf("%s %s: read body: %v", req.Method, redactURL(req.URL), err)
		return tools.Output{
			Status: tools.StatusError,
			Error:  msg,
			Data:   map[string]any{"status_code": resp.StatusCode, "headers": headers, "data": nil},
			HTTP:   map[string]any{"status": resp.StatusCode, "headers": headers},
		}, nil
	}
	payload := parseBody(body, resp.Header.Get("Content-Type"))
	if cred != nil {
		// An endpoint may echo what it was sent: the secrets go no
		// further than this call.
		payload = tools.RedactValue(payload, *cred)
		headers = tools.RedactValue(headers, *cred).(map[string]any)
	}
	out := tools.Output{
		Status: tools.StatusSuccess,
		Data:   map[string]any{"status_code": resp.StatusCode, "headers": headers, "data": payload},
		HTTP:   map[string]any{"status": resp.StatusCode, "headers": headers},
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		out.Status = tools.StatusError
		short := strings.TrimSpace(string(body))
		if short == "" {
			short = nethttp.StatusText(resp.StatusCode)
		}
		out.Error = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, conv.Truncate(short, ErrorBodyBytes))
		if cred != nil {
			out.Error = tools.Redact(out.Error, *cred)
		}
	}
	t.logger(call).Debug("http call", "method", req.Method, "url", redactURL(req.URL), "status", resp.StatusCode,
		"step", call.Step, "task", call.Task, "auth", cfg["auth"] != nil)
	return out, nil
}

// noResponse is the output of a request that got no response (err, told
// as msg): status 0, no headers, no data; http.timeout when it failed for
// lack of time, so that policy rules tell it from other failures
// (output.error.kind timeout), there being no status to say so.
func noResponse(ctx context.Context, err error, msg string) tools.Output {
	info := map[string]any{"status": 0, "headers": map[string]any{}}
	if timedOut(ctx, err) {
		info["timeout"] = true
	}
	return tools.Output{
		Status: tools.StatusError,
		Error:  msg,
		Data:   map[string]any{"status_code": 0, "headers": map[string]any{}, "data": nil},
		HTTP:   info,
	}
}

// timedOut reports whether a request failed for lack of time: its
// deadline (the task's timeout, or the step's spec.timeout) passed, or
// the network gave up waiting (a dial or read timeout).
func timedOut(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (t *Tool) logger(call *tools.Call) *slog.Logger {
	if call.Logger != nil {
		return call.Logger
	}
	if t.cfg.Logger != nil {
		return t.cfg.Logger
	}
	return slog.Default()
}

// build turns the rendered task config into a request.
func (t *Tool) build(ctx context.Context, call *tools.Call) (req *nethttp.Request, cred *tools.Credential, authHeaders []string, timeout time.Duration, follow bool, err error) {
	cfg := call.Config
	method := "GET"
	if m, ok := conv.String(cfg, "method"); ok && m != "" {
		method = strings.ToUpper(m)
	}
	rawURL, ok := conv.String(cfg, "url", "endpoint")
	if !ok || rawURL == "" {
		return nil, nil, nil, 0, false, fmt.Errorf("%w: url is required", ErrBadConfig)
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, nil, nil, 0, false, fmt.Errorf("%w: url %q is not an absolute URL", ErrBadConfig, rawURL)
	}

	timeout = t.cfg.Timeout
	if v, _, present := conv.First(cfg, "timeout", "timeout_seconds"); present {
		d, ok, err := conv.Seconds(v)
		if err != nil {
			return nil, nil, nil, 0, false, fmt.Errorf("%w: timeout: %w", ErrBadConfig, err)
		}
		if ok && d > 0 {
			timeout = d
		}
	}
	follow = true
	if v, ok := cfg["follow_redirects"]; ok {
		if b, ok := conv.Bool(v); ok {
			follow = b
		}
	}

	headers := make(nethttp.Header)
	if hm, ok := cfg["headers"].(map[string]any); ok {
		for k, v := range hm {
			if v == nil {
				continue
			}
			headers.Set(k, conv.Scalar(v))
		}
	}

	// Query: params, plus NoETL's data.query, plus the whole data map for
	// methods without a body.
	var query url.Values
	addQuery := func(m map[string]any) {
		if len(m) == 0 {
			return
		}
		if query == nil {
			query = u.Query()
		}
		for k, v := range m {
			switch v := v.(type) {
			case nil:
				// requests and httpx drop None-valued params.
			case []any:
				query.Del(k)
				for _, e := range v {
					query.Add(k, conv.Scalar(e))
				}
			default:
				query.Set(k, conv.Scalar(v))
			}
		}
	}
	if pm, ok := cfg["params"].(map[string]any); ok {
		addQuery(pm)
	}
	bodyless := method == "GET" || method == "DELETE" || method == "HEAD" || method == "OPTIONS"
	var bodySrc any
	bodyKind := ""
	if dm, ok := cfg["data"].(map[string]any); ok {
		_, hasQ := dm["query"]
		_, hasB := dm["body"]
		if hasQ || hasB {
			if qm, ok := dm["query"].(map[string]any); ok {
				addQuery(qm)
			}
			if hasB {
				bodySrc, bodyKind = dm["body"], "data"
			}
		} else if bodyless {
			addQuery(dm)
		} else {
			bodySrc, bodyKind = dm, "data"
		}
	} else if v, ok := cfg["data"]; ok && v != nil {
		bodySrc, bodyKind = v, "data"
	}
	if query != nil {
		u.RawQuery = query.Encode()
	}
	for _, k := range []string{"json", "body", "payload", "form"} {
		if bodySrc != nil {
			break
		}
		if v, ok := cfg[k]; ok && v != nil {
			bodySrc, bodyKind = v, k
		}
	}

	var body []byte
	if bodySrc != nil {
		ct := strings.ToLower(headers.Get("Content-Type"))
		switch {
		case bodyKind == "form" || strings.Contains(ct, "application/x-www-form-urlencoded"):
			if m, ok := bodySrc.(map[string]any); ok {
				form := make(url.Values, len(m))
				for k, v := range m {
					if v != nil {
						form.Set(k, conv.Scalar(v))
					}
				}
				body = []byte(form.Encode())
			} else {
				body = []byte(conv.Scalar(bodySrc))
			}
			if ct == "" {
				headers.Set("Content-Type", "application/x-www-form-urlencoded")
			}
		case bodyKind != "json":
			if s, ok := bodySrc.(string); ok {
				body = []byte(s)
				break
			}
			fallthrough
		default:
			body, err = json.Marshal(bodySrc)
			if err != nil {
				return nil, nil, nil, 0, false, fmt.Errorf("%w: %s is not JSON-encodable: %w", ErrBadConfig, bodyKind, err)
			}
			if ct == "" {
				headers.Set("Content-Type", "application/json")
			}
		}
	}

	var rdr io.Reader
	if body != nil {
		rdr = bytes.NewReader(body)
	}
	req, err = nethttp.NewRequestWithContext(ctx, method, u.String(), rdr)
	if err != nil {
		return nil, nil, nil, 0, false, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	for k, vs := range headers {
		req.Header[k] = vs
	}

	inline, isInline, err := inlineAuth(cfg)
	if err != nil {
		return nil, nil, nil, 0, false, err
	}
	alias, named := conv.Alias(cfg)
	switch {
	case isInline:
		// The playbook carries the credential (a secret it revealed goes
		// no further than its entry allows: DisallowedSecret below).
		authHeaders = applyAuth(req, inline)
		cred = &inline
	case !named && cfg["auth"] != nil:
		return nil, nil, nil, 0, false, errAuthForm(cfg["auth"])
	}
	if named && !isInline {
		kc := call.Keychain
		if kc == nil {
			kc = t.cfg.Keychain
		}
		if kc == nil {
			return nil, nil, nil, 0, false, fmt.Errorf("http: auth %q: no keychain configured: %w", alias, tools.ErrCredentialNotFound)
		}
		c, err := kc.Resolve(ctx, alias)
		if err != nil {
			return nil, nil, nil, 0, false, fmt.Errorf("http: auth: %w", err)
		}
		if !c.AllowsHost(u.Host) {
			return nil, nil, nil, 0, false, fmt.Errorf("http: auth %q may not be sent to %s: %w (list the host under hosts: in its keychain entry)",
				alias, u.Host, tools.ErrHostNotAllowed)
		}
		if h := headerNameOf(cfg); h != "" && c.Fields["api_key"] != "" {
			// The playbook's header for its api key wins, as in NoETL.
			c.Fields = maps.Clone(c.Fields)
			c.Fields["header_name"] = h
		}
		authHeaders = applyAuth(req, c)
		cred = &c
	}
	// Secrets a playbook put in the request through secret references go
	// no further than their keychain entries allow, like auth's.
	if r, bad := tools.DisallowedSecret(call.Revealed, u.Host); bad {
		return nil, nil, nil, 0, false, fmt.Errorf("http: secret %q may not be sent to %s: %w (list the host under hosts: in its keychain entry)",
			r.Credential.Alias, u.Host, tools.ErrHostNotAllowed)
	}
	return req, cred, authHeaders, timeout, follow, nil
}

// guardRedirects returns a client that follows redirects as t.client
// does, but drops the auth credential's headers from a redirected request
// to a host the credential does not allow (net/http drops Authorization
// on a redirect to another domain, but not an API-key header), and does
// not follow a redirect to a host a revealed secret's entry does not
// allow (the secret may be anywhere in the request): the redirect itself
// is the response then.
func (t *Tool) guardRedirects(cred *tools.Credential, authHeaders []string, revealed []tools.Revealed) *nethttp.Client {
	c := *t.client
	next := t.client.CheckRedirect
	c.CheckRedirect = func(req *nethttp.Request, via []*nethttp.Request) error {
		if _, bad := tools.DisallowedSecret(revealed, req.URL.Host); bad {
			return nethttp.ErrUseLastResponse
		}
		if cred != nil && !cred.AllowsHost(req.URL.Host) {
			for _, h := range authHeaders {
				req.Header.Del(h)
			}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// applyAuth sets the header a credential implies, unless the task set an
// Authorization header itself: a token field → Bearer; username/password →
// Basic; api_key → header_name (default X-API-Key). It returns the header
// it set.
func applyAuth(req *nethttp.Request, c tools.Credential) []string {
	f := c.Fields
	if tok := f["token"]; tok != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+tok)
		return []string{"Authorization"}
	}
	if key := f["api_key"]; key != "" {
		name := f["header_name"]
		if name == "" {
			name = "X-API-Key"
		}
		req.Header.Set(name, key)
		return []string{name}
	}
	if user, pass := f["username"], f["password"]; (user != "" || pass != "") && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
		return []string{"Authorization"}
	}
	return nil
}

// flattenHeaders lower-cases header names (as httpx does for NoETL) and
// joins repeated values with ", ".
func flattenHeaders(h nethttp.Header) map[string]any {
	m := make(map[string]any, len(h))
	for k, vs := range h {
		m[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	return m
}

// parseBody returns the JSON value of body when it parses, else the body
// as a string (nil for an empty body).
func parseBody(body []byte, contentType string) any {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil
	}
	if c := trimmed[0]; c == '{' || c == '[' || c == '"' || strings.Contains(contentType, "json") {
		if v, err := jsonnum.Decode(trimmed); err == nil {
			return v
		}
	}
	return string(body)
}

// streamedPages returns a writer that hands each record of a streamed
// response body (application/x-ndjson, application/jsonl, or the data
// lines of text/event-stream) on as a partial result while the body
// arrives: {"page": n, "data": <the record, parsed as JSON when it is>}.
// It returns nil for other bodies and for calls without a Partial
// receiver.
func streamedPages(call *tools.Call, contentType string, cred *tools.Credential) *proc.Lines {
	if call.Partial == nil {
		return nil
	}
	mediaType, _, _ := strings.Cut(strings.ToLower(contentType), ";")
	sse := false
	switch strings.TrimSpace(mediaType) {
	case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines", "application/json-lines":
	case "text/event-stream":
		sse = true
	default:
		return nil
	}
	page := 0
	return &proc.Lines{W: io.Discard, Line: func(line string) {
		if sse {
			data, ok := strings.CutPrefix(line, "data:")
			if !ok {
				return
			}
			line = strings.TrimPrefix(data, " ")
		}
		if strings.TrimSpace(line) == "" {
			return
		}
		if cred != nil {
			line = tools.Redact(line, *cred)
		}
		page++
		call.EmitPartial(map[string]any{"page": page, "data": parseBody([]byte(line), "application/json")})
	}}
}

// redactURL drops user info and the query from u for error and log text.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.Fragment = ""
	return c.String()
}
