package main

// The --server forms: run, status, events and cancel against a cursorflow
// server's HTTP API (engine/api) instead of an in-process engine.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/eventlog"
)

// Environment variables the remote commands read.
const (
	envServer = "CURSORFLOW_SERVER" // default of --server
	envToken  = "CURSORFLOW_TOKEN"  // default of --token
	// envAPIToken is the server's name for its token (examples/server),
	// read when envToken is unset so that one variable can serve both.
	envAPIToken = "CURSORFLOW_API_TOKEN"
)

// requestTimeout bounds one API call (streams excepted).
const requestTimeout = 30 * time.Second

// hasServerFlag reports whether run's arguments ask for a server.
func hasServerFlag(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--server" || a == "-server" || strings.HasPrefix(a, "--server=") || strings.HasPrefix(a, "-server=") {
			return true
		}
	}
	return false
}

// remoteFlags are the flags every remote command shares.
type remoteFlags struct {
	server string
	token  string
	json   bool
}

func (f *remoteFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.server, "server", os.Getenv(envServer), "cursorflow server base URL (default $"+envServer+")")
	fs.StringVar(&f.token, "token", "", "bearer token (default $"+envToken+", else $"+envAPIToken+", the server's name for it)")
	fs.BoolVar(&f.json, "json", false, "print JSON")
}

// client builds the API client, or prints why it cannot.
func (f *remoteFlags) client(stderr io.Writer) (*apiClient, bool) {
	if f.server == "" {
		fmt.Fprintln(stderr, "cursorflow: --server URL (or $"+envServer+") is required")
		return nil, false
	}
	u, err := url.Parse(f.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "cursorflow: --server %q: want http(s)://host[:port]\n", f.server)
		return nil, false
	}
	token := f.token
	for _, name := range []string{envToken, envAPIToken} {
		if token == "" {
			token = os.Getenv(name)
		}
	}
	// A token read from a file or a mounted secret often ends in a
	// newline, which no HTTP header may hold; the server trims the token
	// it is shown.
	token = strings.TrimSpace(token)
	return &apiClient{base: strings.TrimSuffix(f.server, "/"), token: token, http: &http.Client{}}, true
}

// apiClient calls the cursorflow HTTP API.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// shown is the server's URL as messages and summaries name it: without
// the password a --server URL may carry (basic auth at a proxy in front
// of the server), as net/http's own errors show it.
func (c *apiClient) shown() string {
	u, err := url.Parse(c.base)
	if err != nil {
		return c.base
	}
	return u.Redacted()
}

// apiError is a non-2xx answer.
type apiError struct {
	status int
	body   api.ErrorBody
}

func (e *apiError) Error() string {
	msg := e.body.Error
	if msg == "" {
		msg = http.StatusText(e.status)
	}
	if e.status == http.StatusUnauthorized {
		msg += " (set --token or $" + envToken + ")"
	}
	return fmt.Sprintf("server answered %d: %s", e.status, msg)
}

func (c *apiClient) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// call sends a JSON request and decodes a JSON answer into out.
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		e := &apiError{status: res.StatusCode}
		_ = json.Unmarshal(b, &e.body)
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode %s answer: %w", path, err)
	}
	return nil
}

// stream reads the execution's Server-Sent Events after seq after,
// calling fn for each, until the terminal event (true) or the stream
// ends early (false).
func (c *apiClient) stream(ctx context.Context, id string, after int64, fn func(eventlog.Event)) (bool, int64, error) {
	req, err := c.request(ctx, http.MethodGet, "/v1/executions/"+url.PathEscape(id)+"/events/stream?after="+strconv.FormatInt(after, 10), nil)
	if err != nil {
		return false, after, err
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := c.http.Do(req)
	if err != nil {
		return false, after, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		e := &apiError{status: res.StatusCode}
		_ = json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&e.body)
		return false, after, e
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) == 0 {
				continue
			}
			var ev eventlog.Event
			if err := json.Unmarshal(data, &ev); err != nil {
				return false, after, fmt.Errorf("decode streamed event: %w", err)
			}
			data = data[:0]
			if ev.Seq > after {
				after = ev.Seq
				fn(ev)
			}
			if eventlog.IsTerminal(ev.Type) {
				return true, after, nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimSpace(line[len("data:"):])...)
		}
	}
	return false, after, sc.Err()
}

// follow streams events (reconnecting after a dropped stream) until the
// execution's terminal event. While the server does not answer it says so
// on warn, once, and again once it answers.
func (c *apiClient) follow(ctx context.Context, id string, after int64, fn func(eventlog.Event), warn io.Writer) error {
	backoff := 100 * time.Millisecond
	unreachable := false
	emit := func(ev eventlog.Event) {
		if unreachable {
			unreachable = false
			fmt.Fprintf(warn, "cursorflow: the server at %s answers again\n", c.shown())
		}
		fn(ev)
	}
	for {
		done, next, err := c.stream(ctx, id, after, emit)
		if done {
			return nil
		}
		var ae *apiError
		if errors.As(err, &ae) && ae.status/100 == 4 {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !unreachable {
			unreachable = true
			fmt.Fprintf(warn, "cursorflow: the server at %s does not answer (%v); trying again until it does (the execution goes on without this process)\n", c.shown(), err)
		}
		if next > after {
			backoff = 100 * time.Millisecond
		}
		after = next
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// cmdRunRemote implements `cursorflow run FILE --server URL`.
func cmdRunRemote(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f remoteFlags
	f.register(fs)
	var sets multiFlag
	fs.Var(&sets, "set", "override a workload key: key=value (value read as a YAML scalar; a dotted key such as config.limit sets a key inside a workload mapping); repeatable")
	verbose := fs.Bool("v", false, "print every event as it is recorded")
	progressMode := fs.String("progress", progressAuto, "live progress on stderr: auto (on a terminal, without --json or -v), always or never")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: cursorflow run FILE --server URL [--token TOKEN] [--set key=value]... [--json] [-v] [--progress auto|always|never]")
		return exitUsage
	}
	if !validProgress(*progressMode) {
		fmt.Fprintf(stderr, "cursorflow: --progress %q: want auto, always or never\n", *progressMode)
		return exitUsage
	}
	c, ok := f.client(stderr)
	if !ok {
		return exitUsage
	}
	file := pos[0]
	src, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitUsage
	}
	// The server parses the playbook too; its workload here only places
	// dotted --set keys (a playbook it refuses is reported from there).
	var base map[string]any
	if pb, err := dsl.Parse(file, src); err == nil {
		base = pb.Workload
		// What validate would warn about, checked against this build's
		// tools and drivers (as validate does).
		treg, creg, closer := lintRegistries()
		printWarnings(stderr, pb, file, treg, creg)
		_ = closer.Close()
	}
	workload, err := parseSets(sets, base)
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitUsage
	}
	for _, w := range setWarnings(sets, base) {
		fmt.Fprintf(stderr, "cursorflow: warning: %s\n", w)
	}
	ctx, stop := signalContext()
	defer stop()
	started := time.Now()
	var out api.Started
	// The server refuses a file name longer than api.MaxPlaybookFile: a
	// path that deep is named by its base name, which says as much in
	// the server's file:line:col messages.
	sent := file
	if len(sent) > api.MaxPlaybookFile {
		sent = filepath.Base(sent)
	}
	err = c.call(ctx, http.MethodPost, "/v1/executions", api.StartRequest{Source: string(src), File: sent, Workload: workload}, &out)
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && len(ae.body.Problems) > 0 {
			for _, p := range ae.body.Problems {
				fmt.Fprintf(stderr, "%s: %s\n", p.Position, p.Message)
			}
			return exitUsage
		}
		fmt.Fprintf(stderr, "cursorflow: start: %v\n", err)
		return exitInvalid
	}
	id := out.ExecutionID
	if f.json {
		// stdout carries the one summary object; the id goes to stderr at
		// once, so the execution can be followed or cancelled meanwhile.
		fmt.Fprintf(stderr, "execution %s\n", id)
	} else {
		fmt.Fprintf(stdout, "execution %s\n", id)
	}
	status := func(ctx context.Context) (*engine.Status, error) {
		var st engine.Status
		err := c.call(ctx, http.MethodGet, "/v1/executions/"+url.PathEscape(id), nil, &st)
		return &st, err
	}
	var stopProgress func()
	if wantProgress(*progressMode, f.json || (*verbose && *progressMode == progressAuto), stderr) {
		stopProgress = watchProgress(ctx, stderr, status)
	} else {
		stopProgress = watchHolds(ctx, stderr, status)
	}
	err = c.follow(ctx, id, 0, func(ev eventlog.Event) {
		if *verbose {
			printEvent(stderr, ev)
		}
	}, stderr)
	stopProgress()
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: following %s: %v (check later with: cursorflow status %s --server %s)\n", id, err, id, c.shown())
		return exitInvalid
	}
	var st engine.Status
	if err := c.call(ctx, http.MethodGet, "/v1/executions/"+url.PathEscape(id), nil, &st); err != nil {
		fmt.Fprintf(stderr, "cursorflow: status of %s: %v\n", id, err)
		return exitInvalid
	}
	// The server's view: its event count and its cursor loops' rows, which
	// may have failed or gone to the dead letter in a completed execution.
	o := outcome{id: st.ExecutionID, status: st.Status, steps: st.Steps, events: st.Events,
		elapsed: time.Since(started), rows: cursorRows(&st),
		failedStep: st.FailedStep, failedField: st.FailedField, err: st.Error,
		whereKey: "server", where: c.shown()}
	return o.report(stdout, f.json)
}

// parseSets reads --set key=value pairs, each value as setValue reads it, into
// overrides of the top-level keys of base (the playbook's workload). A
// dotted key that is not itself a key of base sets a key inside a mapping:
// config.limit=9 overrides config with a copy whose limit is 9, its other
// keys kept (a missing mapping on the way is created; a value that is not
// a mapping is an error).
func parseSets(sets []string, base map[string]any) (map[string]any, error) {
	workload := map[string]any{}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want key=value", kv)
		}
		x := setValue(v)
		if _, top := base[k]; top || !strings.Contains(k, ".") {
			workload[k] = x
			continue
		}
		path := strings.Split(k, ".")
		if slices.Contains(path, "") {
			return nil, fmt.Errorf("--set %q: empty part in the dotted key", k)
		}
		head, ok := workload[path[0]]
		if !ok {
			head = base[path[0]]
		}
		m, err := setPath(head, path[0], path[1:], x)
		if err != nil {
			return nil, fmt.Errorf("--set %s: %w", k, err)
		}
		workload[path[0]] = m
	}
	return workload, nil
}

// setWarnings says, one line each, which --set keys (already read by
// parseSets) the playbook's workload base lacks: a typo (regoin for
// region, order.amont for order.amount) would otherwise be added in
// silence while the run reads the workload's own value. A run may add
// keys on purpose, so these only warn; a playbook without a workload block
// is not checked (as validate's workload lint does not check one).
func setWarnings(sets []string, base map[string]any) []string {
	if base == nil {
		return nil
	}
	var out []string
	for _, kv := range sets {
		k, _, _ := strings.Cut(kv, "=")
		if _, top := base[k]; top {
			continue
		}
		path := strings.Split(k, ".")
		m, in := base, "the playbook's workload"
		for i, key := range path {
			v, ok := m[key]
			if !ok {
				out = append(out, fmt.Sprintf("--set %s: %s has no key %s (its keys: %s); the run adds it",
					k, in, key, strings.Join(slices.Sorted(maps.Keys(m)), ", ")))
				break
			}
			if m, ok = v.(map[string]any); !ok {
				break
			}
			in = "workload " + strings.Join(path[:i+1], ".")
		}
	}
	return out
}

// setValue reads a --set value: a YAML number, bool or null as that value,
// a quoted YAML string as its text, a flow list or mapping ([1, 2],
// {a: 1}) as the collection, and anything else as the text exactly as
// given. So "Error: disk full", "- a" and "fix #12" stay the text they
// are, where YAML would read a mapping, a list and a comment.
func setValue(v string) any {
	var y any
	if err := yaml.Unmarshal([]byte(v), &y); err != nil {
		return v
	}
	trimmed := strings.TrimSpace(v)
	switch x := y.(type) {
	case nil:
		if trimmed == "" || trimmed == "null" || trimmed == "~" || trimmed == "Null" || trimmed == "NULL" {
			return nil
		}
		return v
	case string:
		// A quoted string, and nothing after its closing quote.
		if q := trimmed[:min(1, len(trimmed))]; (q == "'" || q == `"`) && len(trimmed) > 1 && strings.HasSuffix(trimmed, q) {
			return y
		}
		return v
	case map[string]any, []any:
		if strings.HasPrefix(trimmed, "[") || strings.HasPrefix(trimmed, "{") {
			return normalizeYAML(y)
		}
		return v
	case bool:
		return y
	case int:
		if leadingZero(trimmed) {
			return v // 007, 02139: an id or a code, not a number
		}
		return normalizeYAML(y)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) || leadingZero(trimmed) || !strings.ContainsAny(trimmed, ".eE") {
			return v // .inf, 02139, an integer past int64: the text keeps it
		}
		return y
	}
	return v // a date, a time, an integer past int64: the text as given
}

// leadingZero reports whether s is a number written with a leading 0
// (after a sign), such as 007 or 02139.
func leadingZero(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return len(s) > 1 && s[0] == '0' && s[1] >= '0' && s[1] <= '9'
}

// setPath returns a copy of the mapping v (nil: a new one), named name in
// errors, with the value at path set to x; the mappings on the way are
// copied, never changed.
func setPath(v any, name string, path []string, x any) (map[string]any, error) {
	var m map[string]any
	switch t := v.(type) {
	case nil:
		m = map[string]any{}
	case map[string]any:
		m = maps.Clone(t)
	default:
		return nil, fmt.Errorf("the workload's %s is not a mapping", name)
	}
	if len(path) == 1 {
		m[path[0]] = x
		return m, nil
	}
	sub, err := setPath(m[path[0]], name+"."+path[0], path[1:], x)
	if err != nil {
		return nil, err
	}
	m[path[0]] = sub
	return m, nil
}

// oneID parses a remote command's flags and its single EXECUTION_ID.
func oneID(name, extra string, fs *flag.FlagSet, f *remoteFlags, args []string, stderr io.Writer) (*apiClient, string, bool) {
	fs.SetOutput(stderr)
	f.register(fs)
	// Either reads from the log instead (cmdStatusLocal, cmdEventsLocal).
	local := ""
	switch name {
	case "status":
		local = "\n   or: cursorflow status EXECUTION_ID --eventlog URL [--json]   (JSON, read from the event log itself: sqlite:PATH, postgres://...)"
	case "events":
		local = "\n   or: cursorflow events EXECUTION_ID --eventlog URL" + extra + " [--json]   (read from the event log itself: sqlite:PATH, postgres://...)"
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: cursorflow %s EXECUTION_ID --server URL [--token TOKEN]%s [--json]%s\n", name, extra, local)
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, "", false
	}
	if len(pos) != 1 || pos[0] == "" {
		fmt.Fprintf(stderr, "usage: cursorflow %s EXECUTION_ID --server URL [--token TOKEN]%s [--json]%s\n", name, extra, local)
		return nil, "", false
	}
	c, ok := f.client(stderr)
	return c, pos[0], ok
}

// cmdStatus implements `cursorflow status EXECUTION_ID --server URL`.
func cmdStatus(args []string, stdout, stderr io.Writer) int {
	var f remoteFlags
	c, id, ok := oneID("status", "", flag.NewFlagSet("status", flag.ContinueOnError), &f, args, stderr)
	if !ok {
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	var st engine.Status
	if err := c.call(ctx, http.MethodGet, "/v1/executions/"+url.PathEscape(id), nil, &st); err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitInvalid
	}
	if f.json {
		b, _ := json.Marshal(st)
		fmt.Fprintln(stdout, string(b))
		return exitOK
	}
	printStatus(stdout, &st)
	return exitOK
}

func printStatus(w io.Writer, st *engine.Status) {
	fmt.Fprintf(w, "execution %s (%s): %s, %d events\n", printable(st.ExecutionID), printable(st.Playbook), st.Status, st.Events)
	if st.Status == engine.StatusFailed {
		fmt.Fprintln(w, failureLine(st.FailedStep, st.FailedField, st.Error))
	}
	steps := make([]string, 0, len(st.Steps))
	for s := range st.Steps {
		steps = append(steps, s)
	}
	sort.Strings(steps)
	for _, s := range steps {
		fmt.Fprintf(w, "  step %-24s %s\n", printable(s), st.Steps[s])
	}
	loops := make([]string, 0, len(st.Loops))
	for l := range st.Loops {
		loops = append(loops, l)
	}
	sort.Strings(loops)
	for _, id := range loops {
		l := st.Loops[id]
		state := "running"
		if l.Finished {
			state = "finished"
		}
		if l.Mode == "cursor" {
			cancelled := ""
			if l.Cancelled > 0 {
				cancelled = fmt.Sprintf(", cancelled %d", l.Cancelled)
			}
			if l.Returned > 0 {
				cancelled += fmt.Sprintf(", handed back unrun %d", l.Returned)
			}
			fmt.Fprintf(w, "  loop %-24s cursor %s: frames %d, rows %d (ok %d, failed %d, dead %d%s), in flight %d\n",
				printable(id), state, l.Frames, l.Rows, l.OK, l.Failed, l.Dead, cancelled, l.InFlight)
		} else {
			var counts []string
			if l.Failed > 0 {
				counts = append(counts, fmt.Sprintf("%d failed", l.Failed))
			}
			if l.Cancelled > 0 {
				counts = append(counts, fmt.Sprintf("%d cancelled", l.Cancelled))
			}
			failed := ""
			if len(counts) > 0 {
				failed = " (" + strings.Join(counts, ", ") + ")"
			}
			fmt.Fprintf(w, "  loop %-24s %s %s: %d/%d done%s, in flight %d\n", printable(id), l.Mode, state, l.Done, l.Items, failed, l.InFlight)
		}
	}
	if len(st.InFlight) > 0 {
		fmt.Fprintf(w, "  in flight: %s\n", printable(strings.Join(st.InFlight, ", ")))
	}
}

// cmdEvents implements `cursorflow events EXECUTION_ID [--follow]`.
func cmdEvents(args []string, stdout, stderr io.Writer) int {
	var f remoteFlags
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	followFlag := fs.Bool("follow", false, "keep streaming until the execution ends")
	after := fs.Int64("after", 0, "start after this event seq")
	c, id, ok := oneID("events", " [--follow] [--after SEQ]", fs, &f, args, stderr)
	if !ok {
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	emit := func(ev eventlog.Event) {
		if f.json {
			b, _ := json.Marshal(ev)
			fmt.Fprintln(stdout, string(b))
		} else {
			printEvent(stdout, ev)
		}
	}
	if *followFlag {
		if err := c.follow(ctx, id, *after, emit, stderr); err != nil {
			if ctx.Err() != nil {
				// Interrupted (^C, as one stops tail -f): the follow
				// ends as asked, as a follow of a local log does.
				return exitOK
			}
			fmt.Fprintf(stderr, "cursorflow: %v\n", err)
			return exitInvalid
		}
		return exitOK
	}
	next := *after
	for {
		var page api.EventPage
		q := "?limit=" + strconv.Itoa(api.MaxEventsLimit) + "&after=" + strconv.FormatInt(next, 10)
		if err := c.call(ctx, http.MethodGet, "/v1/executions/"+url.PathEscape(id)+"/events"+q, nil, &page); err != nil {
			fmt.Fprintf(stderr, "cursorflow: %v\n", err)
			return exitInvalid
		}
		for _, ev := range page.Events {
			emit(ev)
		}
		if len(page.Events) == 0 || page.Terminal || page.NextAfter <= next {
			return exitOK
		}
		next = page.NextAfter
	}
}

// printEvent prints one event as a line: seq, time, type, step and ids.
func printEvent(w io.Writer, ev eventlog.Event) {
	parts := []string{fmt.Sprintf("%5d", ev.Seq), ev.Time.UTC().Format("15:04:05.000"), fmt.Sprintf("%-19s", ev.Type)}
	parts = appendSet(parts, [2]string{"step", ev.Step}, [2]string{"command", ev.CommandID}, [2]string{"loop", ev.LoopID}, [2]string{"worker", ev.WorkerID})
	if ev.Frame != 0 {
		parts = append(parts, "frame="+strconv.Itoa(ev.Frame))
	}
	if ev.Type == eventlog.TypeCallPartial {
		var p struct {
			Task    string          `json:"task"`
			Row     string          `json:"row"`
			Data    json.RawMessage `json:"data"`
			Dropped int             `json:"dropped"`
		}
		if json.Unmarshal(ev.Payload, &p) == nil {
			parts = appendSet(parts, [2]string{"task", p.Task}, [2]string{"row", p.Row})
			if p.Dropped > 0 {
				parts = append(parts, "dropped="+strconv.Itoa(p.Dropped))
			}
			if len(p.Data) > 0 {
				parts = append(parts, "data="+printable(truncateText(string(p.Data), 200)))
			}
		}
	}
	switch ev.Type {
	case eventlog.TypeFrameDone:
		parts = append(parts, frameDoneText(ev.Payload)...)
	case eventlog.TypeCommandIssued:
		// Why an attempt was issued again, and a frame's wait before its
		// claim: what an operator reads a stall or an outage from.
		var p struct {
			Reason string `json:"reason"`
			Settle string `json:"settle"`
			HoldMs int64  `json:"hold_ms"`
		}
		if json.Unmarshal(ev.Payload, &p) == nil {
			parts = appendSet(parts, [2]string{"reason", p.Reason}, [2]string{"settle", p.Settle})
			if p.HoldMs > 0 {
				parts = append(parts, "hold="+(time.Duration(p.HoldMs)*time.Millisecond).String())
			}
		}
	}
	if ev.Type == eventlog.TypeCommandCompleted {
		// A tool that failed, where a policy rule continued (a loop's item,
		// a task), completes its command: say that it failed.
		var p struct {
			Output struct {
				Status string `json:"status"`
				Error  string `json:"error"`
			} `json:"output"`
		}
		if json.Unmarshal(ev.Payload, &p) == nil && p.Output.Status == "error" && p.Output.Error != "" {
			parts = append(parts, "error="+strconv.Quote(p.Output.Error))
		}
	}
	if slices.Contains([]string{eventlog.TypeExecutionFailed, eventlog.TypeStepFailed, eventlog.TypeCommandFailed}, ev.Type) {
		var p struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		if json.Unmarshal(ev.Payload, &p) == nil {
			if msg := p.Error + p.Message; msg != "" {
				parts = append(parts, "error="+strconv.Quote(msg))
			}
		}
	}
	fmt.Fprintln(w, strings.Join(parts, " "))
}

// appendSet appends name=value to parts for each pair whose value is set.
func appendSet(parts []string, pairs ...[2]string) []string {
	for _, kv := range pairs {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+printable(kv[1]))
		}
	}
	return parts
}

// frameDoneText is what a frame.done says in one line: its row counts,
// the rows it handed back unrun, whether it found the source drained, its
// failure, and the first row error, quoted and cut to 200 bytes.
func frameDoneText(payload []byte) []string {
	var p struct {
		Drained  bool `json:"drained"`
		Returned int  `json:"returned"`
		Items    []struct {
			Key   string `json:"key"`
			Error string `json:"error"`
		} `json:"items"`
		Counts struct{ Rows, OK, Failed, Dead int } `json:"counts"`
		Fail   string                               `json:"fail"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return nil
	}
	c := p.Counts
	parts := []string{fmt.Sprintf("rows=%d ok=%d failed=%d dead=%d", c.Rows, c.OK, c.Failed, c.Dead)}
	if p.Returned > 0 {
		parts = append(parts, fmt.Sprintf("returned=%d", p.Returned))
	}
	if p.Drained {
		parts = append(parts, "drained")
	}
	if p.Fail != "" {
		parts = append(parts, "fail="+strconv.Quote(truncateText(p.Fail, 200)))
	}
	for _, it := range p.Items {
		if it.Error != "" {
			parts = append(parts, "error="+strconv.Quote(truncateText("row "+it.Key+": "+it.Error, 200)))
			break
		}
	}
	return parts
}

// truncateText cuts s to max bytes (on a rune boundary), marking the cut.
func truncateText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max] + "…"
}

// cmdCancel implements `cursorflow cancel EXECUTION_ID --server URL`.
func cmdCancel(args []string, stdout, stderr io.Writer) int {
	var f remoteFlags
	c, id, ok := oneID("cancel", "", flag.NewFlagSet("cancel", flag.ContinueOnError), &f, args, stderr)
	if !ok {
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	var out api.Cancelled
	if err := c.call(ctx, http.MethodPost, "/v1/executions/"+url.PathEscape(id)+"/cancel", nil, &out); err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitInvalid
	}
	if f.json {
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintf(stdout, "cancel requested for %s\n", out.ExecutionID)
	}
	return exitOK
}
