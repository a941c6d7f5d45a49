// Package nats is cursorflow's nats tool, compatible with NoETL's
// `kind: nats` tasks: NATS core publish, JetStream publish and message
// lookup, and the JetStream key/value store.
//
// Task configuration:
//
//	auth | credential   keychain alias whose URL is the server
//	                    (nats://host:4222); its fields user/password or
//	                    token (also nats_user, nats_password, nats_token)
//	                    authenticate. Without auth, url names the server.
//	operation           kv_get, kv_put, kv_delete, kv_keys, js_publish,
//	                    js_get_msg or publish (core NATS)
//	bucket, key, value  key/value operations; value is stored as written
//	                    (a mapping or list as JSON); kv_keys takes an
//	                    optional pattern (a glob: user_42_*)
//	subject, data,      publish operations; data is sent as written (a
//	headers, stream     mapping or list as JSON); stream, when given, must
//	                    be the stream that captures the subject
//	stream, seq | last  js_get_msg: by sequence, the stream's last message,
//	| subject           or the last message on a subject
//
// Data follows NoETL's responses: kv_get {status: success | not_found,
// bucket, key, value, revision, created}, where a value that parses as
// JSON is returned parsed; kv_put {status, bucket, key, revision};
// kv_delete {status, bucket, key}; kv_keys {status, bucket, keys, count};
// js_publish {status, stream, seq, duplicate}; publish {status, subject};
// js_get_msg {status, stream, subject, seq, data, time, headers}. kv_put
// creates a missing bucket. A failed call (unreachable server, missing
// stream) is an error Output with Data {"retryable"}; a missing
// operation or key is a returned error.
//
// The tool keeps one connection per server URL, made on first use and
// shared by every call; Close drains them.
package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cursorflow/cursorflow/internal/jsonnum"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/internal/conv"
)

// ErrBadConfig is wrapped by the errors Execute returns for a task that
// cannot make a call (no operation, no key, no server).
var ErrBadConfig = errors.New("nats: bad task configuration")

// ErrClosed is returned by Execute after Close.
var ErrClosed = errors.New("nats: tool closed")

// Config configures the nats tool.
type Config struct {
	// Keychain resolves auth aliases when a Call carries no Keychain.
	// Optional.
	Keychain tools.Keychain
	// ConnectTimeout bounds connecting to a server. Defaults to 5s.
	ConnectTimeout time.Duration
}

// Tool is the nats tool. Create it with New; it is safe for concurrent
// use.
type Tool struct {
	cfg    Config
	mu     sync.Mutex
	conns  map[string]*natsgo.Conn
	closed bool
}

// New returns the nats tool.
func New(cfg Config) *Tool {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	return &Tool{cfg: cfg, conns: map[string]*natsgo.Conn{}}
}

// Close drains every connection the tool made.
func (t *Tool) Close() error {
	t.mu.Lock()
	conns := t.conns
	t.conns, t.closed = nil, true
	t.mu.Unlock()
	for _, nc := range conns {
		nc.Close()
	}
	return nil
}

// TakesSecrets implements tools.SecretTaker: a secret revealed in a task
// (a header, the data) is sent only to NATS servers its keychain entry
// allows (tools.Credential.AllowsHost), as the http tool sends one.
func (t *Tool) TakesSecrets() bool { return true }

// ConfigKeys implements tools.ConfigKeyLister: the keys of every operation
// (see the package doc), aliases included: op for operation, servers
// for url.
func (t *Tool) ConfigKeys() []string {
	return []string{"auth", "credential", "credentials", "url", "servers", "operation", "op", "bucket", "key", "value", "pattern", "subject", "data", "headers", "stream", "msg_id", "seq"}
}

// Execute runs the task's operation.
func (t *Tool) Execute(ctx context.Context, call *tools.Call) (tools.Output, error) {
	cfg := call.Config
	op, _ := conv.String(cfg, "operation", "op")
	if op == "" {
		return tools.Output{}, fmt.Errorf("%w: operation is required (kv_get, kv_put, kv_delete, kv_keys, js_publish, js_get_msg, publish)", ErrBadConfig)
	}
	nc, cred, err := t.conn(ctx, call)
	if err != nil {
		return tools.Output{}, err
	}
	var out tools.Output
	switch op {
	case "publish":
		out, err = publish(nc, cfg)
	case "kv_get", "kv_put", "kv_delete", "kv_keys":
		out, err = kv(ctx, nc, op, cfg)
	case "js_publish":
		out, err = jsPublish(ctx, nc, cfg)
	case "js_get_msg":
		out, err = jsGet(ctx, nc, cfg)
	default:
		return tools.Output{}, fmt.Errorf("%w: unknown operation %q", ErrBadConfig, op)
	}
	if err != nil {
		return tools.Output{}, err
	}
	if cred != nil && out.Error != "" {
		out.Error = tools.Redact(out.Error, *cred)
	}
	return out, nil
}

// conn returns the connection for the call's server.
func (t *Tool) conn(ctx context.Context, call *tools.Call) (*natsgo.Conn, *tools.Credential, error) {
	var opts []natsgo.Option
	var cred *tools.Credential
	serverURL, _ := conv.String(call.Config, "url", "servers")
	if alias, ok := conv.Alias(call.Config); ok {
		kc := call.Keychain
		if kc == nil {
			kc = t.cfg.Keychain
		}
		if kc == nil {
			return nil, nil, fmt.Errorf("nats: credential %q: no keychain configured: %w", alias, tools.ErrCredentialNotFound)
		}
		c, err := kc.Resolve(ctx, alias)
		if err != nil {
			return nil, nil, fmt.Errorf("nats: %w", err)
		}
		cred = &c
		serverURL = c.URL
		if u := c.Fields["nats_url"]; serverURL == "" && u != "" {
			serverURL = u
		}
		user, pass := first(c.Fields, "user", "username", "nats_user"), first(c.Fields, "password", "nats_password")
		if user != "" || pass != "" {
			opts = append(opts, natsgo.UserInfo(user, pass))
		}
		if tok := first(c.Fields, "token", "nats_token"); tok != "" {
			opts = append(opts, natsgo.Token(tok))
		}
	}
	if serverURL == "" {
		return nil, nil, fmt.Errorf("%w: auth (a keychain alias) or url naming the server is required", ErrBadConfig)
	}
	// Secrets a playbook put in the message through secret references go
	// to no server their keychain entries do not allow, as with http.
	for _, host := range serverHosts(serverURL) {
		if r, bad := tools.DisallowedSecret(call.Revealed, host); bad {
			return nil, nil, fmt.Errorf("nats: secret %q may not be sent to %s: %w (list the host under hosts: in its keychain entry)",
				r.Credential.Alias, host, tools.ErrHostNotAllowed)
		}
	}
	key := serverURL
	if cred != nil {
		key = "alias:" + cred.Alias + "|" + serverURL
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, nil, ErrClosed
	}
	if nc := t.conns[key]; nc != nil && !nc.IsClosed() {
		return nc, cred, nil
	}
	opts = append(opts, natsgo.Timeout(t.cfg.ConnectTimeout), natsgo.Name("cursorflow nats tool"))
	nc, err := natsgo.Connect(serverURL, opts...)
	if err != nil {
		msg := err.Error()
		if cred != nil {
			return nil, nil, fmt.Errorf("nats: credential %q: connect: %s", cred.Alias, tools.Redact(msg, *cred))
		}
		return nil, nil, fmt.Errorf("nats: connect: %s", msg)
	}
	t.conns[key] = nc
	return nc, cred, nil
}

// serverHosts returns the host (name:port) of every server of a NATS URL
// list ("nats://a:4222,nats://b:4222"); a server it cannot parse is
// returned as written, which no keychain entry allows unless it says "*".
func serverHosts(servers string) []string {
	var hosts []string
	for _, s := range strings.Split(servers, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			hosts = append(hosts, s)
			continue
		}
		hosts = append(hosts, u.Host)
	}
	return hosts
}

func first(m map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := m[k]; v != "" {
			return v
		}
	}
	return ""
}

// payload encodes a value to send or store: strings as they are, anything
// else as JSON.
func payload(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(x), nil
	case []byte:
		return x, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: value is not JSON-encodable: %w", ErrBadConfig, err)
	}
	return b, nil
}

// decoded returns stored bytes as the JSON value they hold, else as a
// string.
func decoded(b []byte) any {
	if v, err := jsonnum.Decode(b); err == nil {
		return v
	}
	return string(b)
}

func failed(err error) tools.Output {
	return tools.Output{Status: tools.StatusError, Error: "nats: " + err.Error(), Data: map[string]any{"retryable": true}}
}

func publish(nc *natsgo.Conn, cfg map[string]any) (tools.Output, error) {
	subject, _ := conv.String(cfg, "subject")
	if subject == "" {
		return tools.Output{}, fmt.Errorf("%w: publish needs subject", ErrBadConfig)
	}
	data, err := payload(cfg["data"])
	if err != nil {
		return tools.Output{}, err
	}
	msg := &natsgo.Msg{Subject: subject, Data: data, Header: headers(cfg)}
	if err := nc.PublishMsg(msg); err != nil {
		return failed(err), nil
	}
	if err := nc.Flush(); err != nil {
		return failed(err), nil
	}
	return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{"status": "success", "subject": subject}}, nil
}

func headers(cfg map[string]any) natsgo.Header {
	hm, ok := cfg["headers"].(map[string]any)
	if !ok || len(hm) == 0 {
		return nil
	}
	h := natsgo.Header{}
	for k, v := range hm {
		if v != nil {
			h.Set(k, conv.Scalar(v))
		}
	}
	return h
}

func kv(ctx context.Context, nc *natsgo.Conn, op string, cfg map[string]any) (tools.Output, error) {
	bucket, _ := conv.String(cfg, "bucket")
	if bucket == "" {
		return tools.Output{}, fmt.Errorf("%w: %s needs bucket", ErrBadConfig, op)
	}
	key, _ := conv.String(cfg, "key")
	if key == "" && op != "kv_keys" {
		return tools.Output{}, fmt.Errorf("%w: %s needs key", ErrBadConfig, op)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return failed(err), nil
	}
	store, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && op == "kv_put" {
		store, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
		if errors.Is(err, jetstream.ErrBucketExists) {
			store, err = js.KeyValue(ctx, bucket)
		}
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return tools.Output{Status: tools.StatusError, Error: fmt.Sprintf("nats: key/value bucket %q does not exist", bucket),
			Data: map[string]any{"status": "error", "bucket": bucket, "retryable": false}}, nil
	}
	if err != nil {
		return failed(err), nil
	}
	switch op {
	case "kv_get":
		e, err := store.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{"status": "not_found", "bucket": bucket, "key": key, "value": nil}}, nil
		}
		if err != nil {
			return failed(err), nil
		}
		return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{
			"status": "success", "bucket": bucket, "key": key, "value": decoded(e.Value()),
			"revision": int64(e.Revision()), "created": e.Created().UTC().Format(time.RFC3339Nano),
		}}, nil
	case "kv_put":
		b, err := payload(cfg["value"])
		if err != nil {
			return tools.Output{}, err
		}
		rev, err := store.Put(ctx, key, b)
		if err != nil {
			return failed(err), nil
		}
		return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{"status": "success", "bucket": bucket, "key": key, "revision": int64(rev)}}, nil
	case "kv_delete":
		if err := store.Delete(ctx, key); err != nil {
			return failed(err), nil
		}
		return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{"status": "success", "bucket": bucket, "key": key}}, nil
	default: // kv_keys
		pattern, _ := conv.String(cfg, "pattern")
		lister, err := store.ListKeys(ctx)
		if err != nil {
			return failed(err), nil
		}
		list := []any{}
		for k := range lister.Keys() {
			// NoETL's pattern is a glob (user_42_*), not a subject wildcard.
			if ok, _ := path.Match(pattern, k); pattern == "" || ok {
				list = append(list, k)
			}
		}
		return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{"status": "success", "bucket": bucket, "keys": list, "count": int64(len(list))}}, nil
	}
}

func jsPublish(ctx context.Context, nc *natsgo.Conn, cfg map[string]any) (tools.Output, error) {
	subject, _ := conv.String(cfg, "subject")
	if subject == "" {
		return tools.Output{}, fmt.Errorf("%w: js_publish needs subject", ErrBadConfig)
	}
	data, err := payload(cfg["data"])
	if err != nil {
		return tools.Output{}, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return failed(err), nil
	}
	var opts []jetstream.PublishOpt
	if stream, _ := conv.String(cfg, "stream"); stream != "" {
		opts = append(opts, jetstream.WithExpectStream(stream))
	}
	if id, _ := conv.String(cfg, "msg_id"); id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	ack, err := js.PublishMsg(ctx, &natsgo.Msg{Subject: subject, Data: data, Header: headers(cfg)}, opts...)
	if err != nil {
		return failed(err), nil
	}
	return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{
		"status": "success", "stream": ack.Stream, "seq": int64(ack.Sequence), "duplicate": ack.Duplicate,
	}}, nil
}

func jsGet(ctx context.Context, nc *natsgo.Conn, cfg map[string]any) (tools.Output, error) {
	stream, _ := conv.String(cfg, "stream")
	if stream == "" {
		return tools.Output{}, fmt.Errorf("%w: js_get_msg needs stream", ErrBadConfig)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return failed(err), nil
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return failed(err), nil
	}
	var msg *jetstream.RawStreamMsg
	subject, _ := conv.String(cfg, "subject")
	switch seq, hasSeq := cfg["seq"].(int64); {
	case hasSeq:
		msg, err = s.GetMsg(ctx, uint64(seq))
	case subject != "":
		msg, err = s.GetLastMsgForSubject(ctx, subject)
	default:
		info, ierr := s.Info(ctx)
		if ierr != nil {
			return failed(ierr), nil
		}
		msg, err = s.GetMsg(ctx, info.State.LastSeq)
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{"status": "not_found", "stream": stream}}, nil
	}
	if err != nil {
		return failed(err), nil
	}
	h := map[string]any{}
	for k, vs := range msg.Header {
		if !strings.HasPrefix(k, "Nats-") { // the server's own bookkeeping
			h[k] = strings.Join(vs, ", ")
		}
	}
	return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{
		"status": "success", "stream": stream, "subject": msg.Subject, "seq": int64(msg.Sequence),
		"data": decoded(msg.Data), "time": msg.Time.UTC().Format(time.RFC3339Nano), "headers": h,
	}}, nil
}
