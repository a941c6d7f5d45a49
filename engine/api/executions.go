package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/jsonnum"
)

// DefaultEngineTimeout bounds a call to the Runner (a stopped engine never
// answers); past it the API answers 503.
const DefaultEngineTimeout = 30 * time.Second

// streamBatch is how many events one read of a stream fetches.
const streamBatch = 500

// StartRequest is POST /v1/executions's body: exactly one of Playbook
// (a registered name) and Source (YAML text).
type StartRequest struct {
	Playbook string `json:"playbook,omitempty"`
	// Version pins a registered playbook's version; 0 means the latest.
	Version int    `json:"version,omitempty"`
	Source  string `json:"source,omitempty"`
	// File names Source in diagnostics (file:line:col) and is recorded
	// with the execution; defaults to "request.yaml" (the registered
	// playbook's name plus ".yaml" with Playbook). At most
	// MaxPlaybookFile bytes of UTF-8 text without control characters:
	// another is refused with 400.
	File string `json:"file,omitempty"`
	// Workload overrides top-level workload keys.
	Workload map[string]any `json:"workload,omitempty"`
}

// Started is POST /v1/executions's answer.
type Started struct {
	ExecutionID string `json:"execution_id"`
	Playbook    string `json:"playbook,omitempty"`
	Version     int    `json:"version,omitempty"`
}

func (s *server) runnerContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), DefaultEngineTimeout)
}

func (s *server) startExecution(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if (req.Playbook == "") == (req.Source == "") {
		writeError(w, http.StatusBadRequest, `want exactly one of "playbook" (a registered name) and "source" (playbook YAML)`)
		return
	}
	if req.Version < 0 {
		writeError(w, http.StatusBadRequest, `field "version": want a positive integer`)
		return
	}
	if msg := checkFileName(req.File); msg != "" {
		writeError(w, http.StatusBadRequest, `field "file": `+msg)
		return
	}
	out := Started{}
	src, file := []byte(req.Source), req.File
	if req.Playbook != "" {
		pb, err := Playbook{}, ErrPlaybookNotFound
		if validID(req.Playbook) && req.Version <= MaxPlaybookVersion {
			// Otherwise no store holds it, and a database would refuse
			// the query with a 500.
			pb, err = s.cfg.Playbooks.Get(r.Context(), req.Playbook, req.Version)
		}
		if errors.Is(err, ErrPlaybookNotFound) {
			// The name as given, cut short: a client that put YAML where
			// the name goes gets the hint, not its document back.
			name := req.Playbook
			if len(name) > 80 || strings.ContainsAny(name, "\n\r") {
				name, _, _ = strings.Cut(name, "\n")
				if len(name) > 80 {
					name = strings.ToValidUTF8(name[:80], "")
				}
				name = strings.TrimSpace(name) + "…"
				writeError(w, http.StatusNotFound, fmt.Sprintf(`playbook %q is not registered (a playbook's YAML goes in "source"; "playbook" names a registered one)`, name))
				return
			}
			msg := fmt.Sprintf("playbook %q is not registered", name)
			if req.Version > 0 {
				msg = fmt.Sprintf("playbook %q has no version %d", name, req.Version)
			}
			writeError(w, http.StatusNotFound, msg)
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		src, out.Playbook, out.Version = []byte(pb.Source), pb.Name, pb.Version
		if file == "" {
			file = pb.Name + ".yaml"
		}
	}
	if file == "" {
		file = "request.yaml"
	}
	workload, _ := jsonnum.Normalize(req.Workload).(map[string]any)
	ctx, cancel := s.runnerContext(r)
	defer cancel()
	id, err := s.cfg.Engine.Start(ctx, src, engine.StartOptions{File: file, Workload: workload})
	if err != nil && id != "" {
		// The engine took the start but did not confirm its record in
		// time (engine.Engine.Start): the execution may run. The client
		// gets its id, to look it up before starting the work again.
		s.log.WarnContext(r.Context(), "api: start taken but not confirmed", "execution_id", id, "error", err)
		w.Header().Set("Location", "/v1/executions/"+id)
		writeJSON(w, http.StatusServiceUnavailable, ErrorBody{ExecutionID: id,
			Error: "the engine took the start but did not confirm it in time: execution " + id + " may run; GET /v1/executions/" + id + " before starting it again"})
		return
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "engine: vars.") {
			// Rendering the playbook's vars against the workload failed:
			// the request's input is at fault.
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		s.runnerFailed(w, r, err)
		return
	}
	out.ExecutionID = id
	attrs := []any{"execution_id", id, "file", file}
	if out.Playbook != "" { // a registered playbook, not source sent inline
		attrs = append(attrs, "playbook", out.Playbook, "version", out.Version)
	}
	s.log.InfoContext(r.Context(), "execution started", attrs...)
	w.Header().Set("Location", "/v1/executions/"+id)
	writeJSON(w, http.StatusCreated, out)
}

// MaxPlaybookFile is the longest file name, in bytes, a client may give a
// playbook's source (StartRequest.File, POST /v1/playbooks?file=). The
// name is recorded in the execution.started event and logged: unbounded,
// anyone with a token could make every reader of the execution carry
// megabytes. 1024 bytes holds any path a client is likely to send (the
// cursorflow CLI sends the path it was given, or else its base name).
const MaxPlaybookFile = 1024

// checkFileName says what is wrong with a client's file name, or "". The
// name is not echoed: it may be a megabyte, or hold control characters
// that would rewrite a terminal or forge log lines.
func checkFileName(name string) string {
	if len(name) > MaxPlaybookFile {
		return fmt.Sprintf("%d bytes: want at most %d", len(name), MaxPlaybookFile)
	}
	if !validID(name) {
		return "want UTF-8 text without control characters"
	}
	return ""
}

// runnerFailed maps a Runner error: a deadline means the engine did not
// answer (503), like ErrUnavailable.
func (s *server) runnerFailed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
		s.log.ErrorContext(r.Context(), "api: engine did not answer", "path", r.URL.Path, "error", err)
		writeError(w, http.StatusServiceUnavailable, "engine did not answer in time")
		return
	}
	s.fail(w, r, err)
}

// ExecutionList is GET /v1/executions's answer.
type ExecutionList struct {
	// Executions are newest first.
	Executions []engine.ExecutionSummary `json:"executions"`
	// Next is set when the page is full: the after of the next page
	// (older executions).
	Next string `json:"next,omitempty"`
}

func (s *server) listExecutions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts := engine.ListOptions{Status: q.Get("status")}
	switch opts.Status {
	case "", engine.StatusRunning, engine.StatusCompleted, engine.StatusFailed, engine.StatusCancelled:
	default:
		writeError(w, http.StatusBadRequest, "query parameter status: want running, completed, failed or cancelled, got "+strconv.Quote(opts.Status))
		return
	}
	if v := q.Get("unfinished"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "query parameter unfinished: want true or false, got "+strconv.Quote(v))
			return
		}
		if b && opts.Status != "" && opts.Status != engine.StatusRunning {
			writeError(w, http.StatusBadRequest, "query parameters unfinished=true and status="+opts.Status+" exclude each other")
			return
		}
		if b {
			opts.Status = engine.StatusRunning
		}
	}
	limit, err := queryInt(r, "limit", engine.DefaultListLimit, 1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	opts.Limit = int(min(limit, engine.MaxListLimit))
	opts.After = q.Get("after")
	if opts.After != "" && (len(opts.After) > engine.MaxExecutionIDLen || !validID(opts.After)) {
		writeError(w, http.StatusBadRequest, "query parameter after: want an execution id (the previous page's next)")
		return
	}
	list, err := s.cfg.Projection.List(r.Context(), opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := ExecutionList{Executions: list}
	if len(list) == opts.Limit {
		out.Next = list[len(list)-1].ExecutionID
	}
	writeJSON(w, http.StatusOK, out)
}

// inspect reads the execution's status from the projection, answering
// 404 for an unknown one.
func (s *server) inspect(w http.ResponseWriter, r *http.Request) (*engine.Status, bool) {
	id := r.PathValue("id")
	st, err := s.cfg.Projection.Status(r.Context(), id)
	if errors.Is(err, engine.ErrUnknownExecution) {
		executionNotFound(w, id)
		return nil, false
	}
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return st, true
}

func (s *server) getExecution(w http.ResponseWriter, r *http.Request) {
	if st, ok := s.inspect(w, r); ok {
		writeJSON(w, http.StatusOK, st)
	}
}

// ExecutionPlaybook is GET /v1/executions/{id}/playbook's answer: the
// source the execution runs, as recorded when it started, with what
// validating it finds today.
type ExecutionPlaybook struct {
	ExecutionID string `json:"execution_id"`
	File        string `json:"file,omitempty"`
	Source      string `json:"source"`
	// Problems are errors (the source no longer validates, for example
	// after an upgrade); Warnings are non-fatal findings (unknown keys).
	Problems []Problem `json:"problems"`
	Warnings []Problem `json:"warnings"`
}

func (s *server) getExecutionPlaybook(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	file, src, err := s.cfg.Projection.Playbook(r.Context(), id)
	if errors.Is(err, engine.ErrUnknownExecution) {
		executionNotFound(w, id)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := ExecutionPlaybook{ExecutionID: id, File: file, Source: src, Problems: []Problem{}, Warnings: []Problem{}}
	pb, err := dsl.Parse(file, []byte(src))
	var list dsl.ErrorList
	switch {
	case errors.As(err, &list):
		out.Problems = problemsOf(list)
	case err != nil:
		out.Problems = []Problem{{File: file, Message: err.Error()}}
	default:
		warns := make([]*dsl.Diagnostic, len(pb.Warnings))
		for i := range pb.Warnings {
			warns[i] = &pb.Warnings[i]
		}
		out.Warnings = problemsOf(warns)
	}
	writeJSON(w, http.StatusOK, out)
}

// Cancelled is POST /v1/executions/{id}/cancel's answer.
type Cancelled struct {
	ExecutionID string `json:"execution_id"`
	// Status is "cancel_requested": the execution ends cancelled once its
	// orchestrator has applied the request.
	Status string `json:"status"`
}

func (s *server) cancelExecution(w http.ResponseWriter, r *http.Request) {
	st, ok := s.inspect(w, r)
	if !ok {
		return
	}
	log := s.log.With("execution_id", st.ExecutionID)
	if st.Status != engine.StatusRunning {
		writeError(w, http.StatusConflict, fmt.Sprintf("execution %s already ended %s", st.ExecutionID, st.Status))
		return
	}
	ctx, cancel := s.runnerContext(r)
	defer cancel()
	if err := s.cfg.Engine.Cancel(ctx, st.ExecutionID); err != nil {
		if errors.Is(err, engine.ErrUnknownExecution) {
			// Running per the log but not driven here: it ended meanwhile,
			// or another orchestrator (or none, until resumed) drives it.
			log.WarnContext(r.Context(), "cancel refused: execution not driven by this engine", "error", err)
			writeError(w, http.StatusConflict, "execution "+st.ExecutionID+" is not driven by this server's engine")
			return
		}
		s.runnerFailed(w, r, err)
		return
	}
	log.InfoContext(r.Context(), "execution cancel requested")
	writeJSON(w, http.StatusAccepted, Cancelled{ExecutionID: st.ExecutionID, Status: "cancel_requested"})
}

// EventPage is GET /v1/executions/{id}/events's answer.
type EventPage struct {
	Events []eventlog.Event `json:"events"`
	// NextAfter is the after value of the next page (the last event's
	// seq, or the request's after when the page is empty).
	NextAfter int64 `json:"next_after"`
	// Terminal is true when the page holds the execution's terminal event.
	Terminal bool `json:"terminal"`
}

func queryInt(r *http.Request, name string, def, min int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min {
		return 0, badRequest("query parameter %s: want an integer >= %d, got %q", name, min, v)
	}
	return n, nil
}

// exists reports whether the log holds any event of the execution.
func (s *server) exists(ctx context.Context, id string) (bool, error) {
	evs, err := s.cfg.Log.Read(ctx, id, 0, 1)
	return len(evs) > 0, err
}

func (s *server) listEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, err := queryInt(r, "after", 0, 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := queryInt(r, "limit", DefaultEventsLimit, 1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit = min(limit, MaxEventsLimit)
	evs, err := s.cfg.Log.Read(r.Context(), id, after, int(limit))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(evs) == 0 {
		ok, err := s.exists(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !ok {
			executionNotFound(w, id)
			return
		}
	}
	page := EventPage{Events: evs, NextAfter: after}
	if page.Events == nil {
		page.Events = []eventlog.Event{}
	}
	for _, ev := range evs {
		page.NextAfter = ev.Seq
		page.Terminal = page.Terminal || eventlog.IsTerminal(ev.Type)
	}
	writeJSON(w, http.StatusOK, page)
}

// streamEvents sends the execution's events as Server-Sent Events (id:
// seq, event: type, data: the event's JSON) from ?after= or Last-Event-ID,
// and ends after the terminal event.
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx := r.Context()
	after, err := queryInt(r, "after", 0, 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "header Last-Event-ID: want an event seq, got "+strconv.Quote(v))
			return
		}
		after = max(after, n)
	}
	ok, err := s.exists(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		executionNotFound(w, id)
		return
	}
	log := s.log.With("execution_id", id)
	ended := false
	rc := http.NewResponseController(w)
	// A server-wide WriteTimeout would cut long streams: each write gets
	// its own deadline instead (a client that stops reading blocks a
	// write once its socket buffers fill; the deadline ends the stream).
	// The deadline is cleared while the stream waits for events: over
	// HTTP/2 a deadline that passes resets the stream even with no write
	// in progress.
	writing := func() { _ = rc.SetWriteDeadline(time.Now().Add(s.cfg.StreamWriteTimeout)) }
	writing()
	writeFailed := func(err error) {
		log.DebugContext(ctx, "event stream closed: write failed (client gone or not reading)", "after", after, "error", err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	log.DebugContext(ctx, "event stream opened", "after", after)
	for !ended {
		evs, err := s.cfg.Log.Read(ctx, id, after, streamBatch)
		writing()
		if err != nil {
			if ctx.Err() == nil {
				log.ErrorContext(ctx, "event stream: read failed", "error", err)
				fmt.Fprintf(w, "event: error\ndata: %s\n\n", mustMarshal(ErrorBody{Error: "read events failed"}))
				_ = rc.Flush()
			}
			return
		}
		for _, ev := range evs {
			b, err := json.Marshal(ev)
			if err != nil {
				b = mustMarshal(ErrorBody{Error: "encode event: " + err.Error()})
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b); err != nil {
				writeFailed(err)
				return
			}
			after = ev.Seq
			if eventlog.IsTerminal(ev.Type) {
				ended = true
				break
			}
		}
		if err := rc.Flush(); err != nil {
			writeFailed(err)
			return
		}
		if ended || len(evs) == streamBatch {
			continue
		}
		if len(evs) == 0 {
			// Caught up with nothing sent: a client resuming at or past
			// the terminal event (a Last-Event-ID, an ?after= beyond the
			// end) would otherwise wait forever for one that never comes.
			if ended, err = s.endedBy(ctx, id, after); err != nil {
				if ctx.Err() == nil {
					log.ErrorContext(ctx, "event stream: status failed", "error", err)
				}
				return
			}
			if ended {
				break
			}
		}
		_ = rc.SetWriteDeadline(time.Time{})
		wctx, cancel := context.WithTimeout(ctx, s.cfg.KeepAlive)
		err = s.cfg.Log.Wait(wctx, id, after)
		cancel()
		switch {
		case ctx.Err() != nil:
			log.DebugContext(ctx, "event stream closed by client", "after", after)
			return
		case errors.Is(err, context.DeadlineExceeded):
			writing()
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				writeFailed(err)
				return
			}
			if err := rc.Flush(); err != nil {
				writeFailed(err)
				return
			}
		case err != nil:
			log.ErrorContext(ctx, "event stream: wait failed", "error", err)
			return
		}
	}
	log.DebugContext(ctx, "event stream ended", "after", after)
}

// endedBy reports whether the execution has ended with its last event at
// or before seq after, so that a stream from there has nothing to wait for.
func (s *server) endedBy(ctx context.Context, id string, after int64) (bool, error) {
	st, err := s.cfg.Projection.Status(ctx, id)
	if err != nil {
		return false, err
	}
	return st.Status != engine.StatusRunning && st.LastSeq <= after, nil
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
