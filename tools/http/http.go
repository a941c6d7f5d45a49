package http

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"crypto/x509"
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
	"syscall"
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
	// follow follows redirects for a request that carries no credential
	// (guardRedirects without one).
	follow *nethttp.Client
	pace   *pacer
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
	t.follow = t.guardRedirects(nil, nil, nil)
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

	client := t.noRedirect
	switch {
	case follow && (cred != nil || len(call.Revealed) > 0):
		client = t.guardRedirects(cred, authHeaders, call.Revealed)
	case follow:
		client = t.follow
	}
	host := req.URL.Host
	if t.pace != nil {
		if err := t.pace.acquire(ctx, host); err != nil {
			return noResponse(ctx, req.Method, err, fmt.Sprintf("%s %s: waiting for the host's rate limit: %v", req.Method, redactURL(req.URL), err)), nil
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
		// Not err.Error(): net/http's *url.Error quotes the request's
		// URL, query string (an api_key=...) and user name included.
		cause := err
		var ue *url.Error
		if errors.As(err, &ue) {
			cause = ue.Err
		}
		msg := fmt.Sprintf("%s %s: %v", req.Method, redactURL(req.URL), cause)
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
		return noResponse(ctx, req.Method, err, msg), nil
	}
	defer resp.Body.Close()

	var bodyReader io.Reader = resp.Body
	if !resp.Uncompressed {
		// The task asked for a compressed body itself (an
		// Accept-Encoding header), so net/http left it encoded: decode
		// it as NoETL's httpx does. The size cap applies to what it
		// decodes to, so a gzip bomb stops there.
		dec, err := decodeBody(resp)
		if err != nil {
			return t.bodyError(req, resp, cred, fmt.Errorf("%s body: %w", resp.Header.Get("Content-Encoding"), err)), nil
		}
		defer dec.Close()
		bodyReader = dec
	}
	bodyReader = io.LimitReader(bodyReader, t.cfg.MaxBodyBytes+1)
	pages := streamedPages(call, resp.Header.Get("Content-Type"), cred)
	if pages != nil {
		bodyReader = io.TeeReader(bodyReader, pages)
	}
	var body []byte
	if resp.ContentLength > t.cfg.MaxBodyBytes {
		// Refused unread: reading up to the cap first would only hold
		// that much memory (and wait that long) for an error.
		err = fmt.Errorf("response body of %d bytes is larger than %d bytes", resp.ContentLength, t.cfg.MaxBodyBytes)
	} else if resp.ContentLength > 0 && resp.Header.Get("Content-Encoding") == "" {
		// Room for the whole body and the read that meets its end, so
		// the buffer is not grown (doubled) as it fills.
		var buf bytes.Buffer
		buf.Grow(int(resp.ContentLength) + bytes.MinRead)
		_, err = buf.ReadFrom(bodyReader)
		body = buf.Bytes()
	} else {
		body, err = readChunked(bodyReader, t.cfg.MaxBodyBytes)
	}
	if pages != nil && err == nil && int64(len(body)) <= t.cfg.MaxBodyBytes {
		// A body cut short (a timeout, a reset, the size cap) ends in
		// half a record: only a whole body hands on its last line.
		pages.Flush()
	}
	if err == nil && int64(len(body)) > t.cfg.MaxBodyBytes {
		err = fmt.Errorf("response body larger than %d bytes", t.cfg.MaxBodyBytes)
	}
	if err != nil {
		if !timedOut(ctx, err) {
			return t.bodyError(req, resp, cred, err), nil
		}
		// The headers came in time, the body did not (a server that
		// trickles it): as much a timeout as no answer at all, for
		// policies (output.error.kind timeout) and for the reader.
		err = fmt.Errorf("timeout after %s (HTTP %d, %d bytes read)", timeout, resp.StatusCode, len(body))
		if bounded && callerDeadline.Before(start.Add(timeout)) {
			err = fmt.Errorf("not read before the caller's deadline (%s; HTTP %d, %d bytes read)",
				callerDeadline.Sub(start).Round(time.Millisecond), resp.StatusCode, len(body))
		}
		out := t.bodyError(req, resp, cred, err)
		out.HTTP["timeout"] = true
		out.Data.(map[string]any)["retryable"] = true
		return out, nil
	}
	headers := flattenHeaders(resp.Header)
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

// readChunked reads r to its end in chunks of growing size, then joins
// them: a body of unknown length costs its size (twice, while they are
// joined), where a doubling buffer allocates several times the size of a
// body that runs on to the size cap. A body longer than limit is an error
// once it passes limit, and is never joined.
func readChunked(r io.Reader, limit int64) ([]byte, error) {
	const first, largest = 32 << 10, 4 << 20
	var chunks [][]byte
	size := first
	total := int64(0)
	for {
		c := make([]byte, min(int64(size), limit+1-total))
		n := 0
		var err error
		for n < len(c) && err == nil {
			// Not io.ReadFull: it reports a body cut short
			// (io.ErrUnexpectedEOF from net/http or gzip) as a chunk
			// that merely did not fill.
			var m int
			m, err = r.Read(c[n:])
			n += m
		}
		total += int64(n)
		if n > 0 {
			chunks = append(chunks, c[:n])
		}
		if total > limit {
			return nil, fmt.Errorf("response body larger than %d bytes", limit)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return joinChunks(chunks, total), err
		}
		size = min(size*2, largest)
	}
	return joinChunks(chunks, total), nil
}

// joinChunks returns the chunks' bytes, of total length, as one slice.
func joinChunks(chunks [][]byte, total int64) []byte {
	switch len(chunks) {
	case 0:
		return nil
	case 1:
		return chunks[0]
	}
	b := make([]byte, 0, total)
	for _, c := range chunks {
		b = append(b, c...)
	}
	return b
}

// bodyError is the output of a response whose body could not be read
// (err, told with the request's redacted URL); its data.retryable says
// whether the body may come whole if the request is sent again
// (transient).
func (t *Tool) bodyError(req *nethttp.Request, resp *nethttp.Response, cred *tools.Credential, err error) tools.Output {
	headers := flattenHeaders(resp.Header)
	msg := fmt.Sprintf("%s %s: read body: %v", req.Method, redactURL(req.URL), err)
	if cred != nil {
		headers = tools.RedactValue(headers, *cred).(map[string]any)
		msg = tools.Redact(msg, *cred)
	}
	return tools.Output{
		Status: tools.StatusError,
		Error:  msg,
		Data:   map[string]any{"status_code": resp.StatusCode, "headers": headers, "data": nil, "retryable": transient(req.Method, err)},
		HTTP:   map[string]any{"status": resp.StatusCode, "headers": headers},
	}
}

// transient reports whether a request of method that failed with err
// (no response, or a body cut short) may succeed if sent again unchanged:
// when no connection was made (refused, unreachable, a DNS lookup that
// failed for now), whatever the method, since nothing reached the server;
// when the connection was lost during the exchange (reset, closed early,
// a body cut short), only for an idempotent method (RFC 9110, 9.2.2),
// since the server may have acted on the request already. A cancel, an
// unknown host, a certificate refused and a body over the size cap are
// not transient; a timeout is told apart (http.timeout) and retryable
// whatever the method, as an HTTP 504 is.
func transient(method string, err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTemporary || dnsErr.IsTimeout
	}
	var certErr *tls.CertificateVerificationError
	var hostErr x509.HostnameError
	var authErr x509.UnknownAuthorityError
	var invalidErr x509.CertificateInvalidError
	if errors.As(err, &certErr) || errors.As(err, &hostErr) || errors.As(err, &authErr) || errors.As(err, &invalidErr) {
		return false
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return idempotent(method)
	}
	return false
}

// idempotent reports whether a request of method may be sent twice with
// the effect of once (RFC 9110, 9.2.2).
func idempotent(method string) bool {
	switch method {
	case nethttp.MethodGet, nethttp.MethodHead, nethttp.MethodOptions, nethttp.MethodTrace, nethttp.MethodPut, nethttp.MethodDelete:
		return true
	}
	return false
}

// decodeBody returns resp's body decoded of its Content-Encoding when it
// is gzip or deflate (zlib, or raw deflate as some servers send), else
// the body as it is.
func decodeBody(resp *nethttp.Response) (io.ReadCloser, error) {
	enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	switch enc {
	case "gzip", "x-gzip":
		if resp.ContentLength == 0 {
			return io.NopCloser(resp.Body), nil
		}
		zr, err := gzip.NewReader(resp.Body)
		if errors.Is(err, io.EOF) {
			return io.NopCloser(resp.Body), nil
		}
		return zr, err
	case "deflate":
		br := bufio.NewReader(resp.Body)
		if head, err := br.Peek(2); err == nil && (uint16(head[0])<<8|uint16(head[1]))%31 == 0 && head[0]&0x0f == 8 {
			zr, err := zlib.NewReader(br)
			return zr, err
		}
		return flate.NewReader(br), nil
	}
	return io.NopCloser(resp.Body), nil
}

// noResponse is the output of a request of method that got no response
// (err, told as msg): status 0, no headers, no data; http.timeout when it
// failed for lack of time, so that policy rules tell it from other
// failures (output.error.kind timeout), there being no status to say so;
// data.retryable when it failed for lack of time or transient says the
// request may succeed if sent again (output.error.retryable).
func noResponse(ctx context.Context, method string, err error, msg string) tools.Output {
	info := map[string]any{"status": 0, "headers": map[string]any{}}
	late := timedOut(ctx, err)
	if late {
		info["timeout"] = true
	}
	return tools.Output{
		Status: tools.StatusError,
		Error:  msg,
		Data:   map[string]any{"status_code": 0, "headers": map[string]any{}, "data": nil, "retryable": late || transient(method, err)},
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
	if u.User != nil {
		// https://user:pass@host: the Basic authorization net/http would
		// send, made a credential like an inline auth block's, so that it
		// is redacted from what an endpoint echoes (base64-encoded, which
		// no concealment of the password recognises) and stays behind on
		// a redirect to another origin. Without a password the user name
		// is the secret (https://token@host).
		user := u.User.Username()
		pass, hasPass := u.User.Password()
		req.URL.User = nil
		if req.Header.Get("Authorization") == "" && (user != "" || pass != "") {
			req.SetBasicAuth(user, pass)
			authHeaders = append(authHeaders, "Authorization")
			c := tools.Credential{Alias: "the url's user info", Fields: map[string]string{}}
			if cred != nil {
				c = *cred
				c.Fields = maps.Clone(c.Fields)
			}
			c.Fields["username"], c.Fields["password"] = user, pass
			if !hasPass || pass == "" {
				c.Fields["userinfo_secret"] = user
			}
			cred = &c
		}
	}
	// Secrets a playbook put in the request through secret references go
	// no further than their keychain entries allow, like auth's.
	if r, bad := tools.DisallowedSecret(call.Revealed, u.Host); bad {
		return nil, nil, nil, 0, false, fmt.Errorf("http: secret %q may not be sent to %s: %w (list the host under hosts: in its keychain entry)",
			r.Credential.Alias, u.Host, tools.ErrHostNotAllowed)
	}
	return req, cred, authHeaders, timeout, follow, nil
}

// maxRedirects bounds the redirects one request follows.
const maxRedirects = 10

// guardRedirects returns a client that follows up to maxRedirects
// redirects, and on each:
//
//   - drops the auth credential's headers from a request to a host the
//     credential does not allow (net/http drops Authorization on a
//     redirect to another domain, but not an API-key header, and not
//     Authorization to another port of the same name) unless it goes to
//     the origin of the first request (an inline auth block allows no
//     other), and from a request that left https for plain http (the
//     credential would cross the network in clear text);
//   - does not follow a redirect to a host a revealed secret's entry does
//     not allow, nor from https to plain http (the secret may be anywhere
//     in the request): the redirect itself is the response then;
//   - drops the Referer net/http sets from the previous URL when the
//     origin changes: its query string (an api_key=...) is for the
//     previous host only. A Referer the task set itself stays.
func (t *Tool) guardRedirects(cred *tools.Credential, authHeaders []string, revealed []tools.Revealed) *nethttp.Client {
	c := *t.client
	next := t.client.CheckRedirect
	c.CheckRedirect = func(req *nethttp.Request, via []*nethttp.Request) error {
		first, prev := via[0], via[len(via)-1]
		downgrade := first.URL.Scheme == "https" && req.URL.Scheme != "https"
		if _, bad := tools.DisallowedSecret(revealed, req.URL.Host); bad || (downgrade && len(revealed) > 0) {
			return nethttp.ErrUseLastResponse
		}
		if cred != nil && (downgrade || !cred.AllowsHost(req.URL.Host) && !sameOrigin(req.URL, first.URL)) {
			for _, h := range authHeaders {
				req.Header.Del(h)
			}
		}
		if !sameOrigin(req.URL, prev.URL) {
			if own := first.Header.Get("Referer"); own != "" {
				req.Header.Set("Referer", own)
			} else {
				req.Header.Del("Referer")
			}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects (the last to %s)", maxRedirects, redactURL(req.URL))
		}
		return nil
	}
	return &c
}

// sameOrigin reports whether a and b share scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && portOf(a) == portOf(b)
}

// portOf returns u's port, or its scheme's default.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
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
