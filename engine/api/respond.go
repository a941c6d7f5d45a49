package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	// Problems lists a playbook's diagnostics when it does not validate.
	Problems []Problem `json:"problems,omitempty"`
	// ExecutionID names the execution a start that was not confirmed in
	// time may have started (503 from POST /v1/executions): look it up
	// before starting the work again.
	ExecutionID string `json:"execution_id,omitempty"`
}

// Problem is one playbook diagnostic.
type Problem struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
	// Position is "file:line:col", ready to print.
	Position string `json:"position"`
}

func problemsOf(list []*dsl.Diagnostic) []Problem {
	out := make([]Problem, 0, len(list))
	for _, d := range list {
		out = append(out, Problem{File: d.Pos.File, Line: d.Pos.Line, Col: d.Pos.Col, Message: d.Message, Position: d.Pos.String()})
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorBody{Error: "encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg})
}

// httpError is an error that knows its response status.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// readBody reads the whole (size-limited) body.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	b, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &httpError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit)}
		}
		return nil, badRequest("read request body: %v", err)
	}
	return b, nil
}

// decodeJSON reads the body into dst strictly: unknown fields, wrong
// types, trailing data and empty bodies are 400s that say what is wrong.
// Numbers decode as json.Number so integers stay integers.
func (s *server) decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	b, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return badRequest("request body is empty: want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return badRequest("invalid JSON body: %s", describeJSONError(err, b))
	}
	if dec.More() {
		return badRequest("invalid JSON body: unexpected data after the JSON object")
	}
	return nil
}

func describeJSONError(err error, b []byte) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := lineCol(b, syn.Offset)
		return fmt.Sprintf("syntax error at line %d, column %d: %v", line, col, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return fmt.Sprintf("the body is a JSON %s, want an object", typ.Value)
		}
		return fmt.Sprintf("field %q: got a JSON %s, want %s", field, typ.Value, jsonKind(typ.Type.Kind().String()))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of input"
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "unknown field " + f
	}
	return strings.TrimPrefix(msg, "json: ")
}

func jsonKind(goKind string) string {
	switch goKind {
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "float64":
		return "a number"
	}
	return goKind
}

func lineCol(b []byte, offset int64) (line, col int) {
	if offset > int64(len(b)) {
		offset = int64(len(b))
	}
	line, col = 1, 1
	for _, c := range b[:offset] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// fail writes err as a response: its own status for an httpError, a
// playbook's diagnostics for a dsl.ErrorList, 500 otherwise.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	var list dsl.ErrorList
	var unsupported *engine.UnsupportedError
	switch {
	case errors.As(err, &he):
		writeError(w, he.status, he.msg)
	case errors.Is(err, engine.ErrRecordedPlaybook) && errors.As(err, &list):
		// Not the request's playbook: the one an execution was started
		// with, by a release that accepted what this one refuses.
		writeJSON(w, http.StatusConflict, ErrorBody{Error: "this server refuses the playbook the execution was started with (the release that started it accepted it); finish it with that release", Problems: problemsOf(list)})
	case errors.As(err, &list):
		writeJSON(w, http.StatusBadRequest, ErrorBody{Error: fmt.Sprintf("playbook is invalid: %d problem(s)", len(list)), Problems: problemsOf(list)})
	case errors.As(err, &unsupported):
		probs := make([]*dsl.Diagnostic, len(unsupported.Problems))
		for i := range unsupported.Problems {
			probs[i] = &unsupported.Problems[i]
		}
		writeJSON(w, http.StatusUnprocessableEntity, ErrorBody{Error: fmt.Sprintf("playbook uses what this server does not run: %d problem(s)", len(probs)), Problems: problemsOf(probs)})
	case errors.Is(err, ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, eventlog.ErrUnavailable):
		// The log's error may name its host and user: logged, not sent.
		s.log.WarnContext(r.Context(), "api: event log unavailable", "method", r.Method, "path", r.URL.Path, "error", err)
		writeError(w, http.StatusServiceUnavailable, "the event log is unavailable; try again")
	case errors.Is(err, r.Context().Err()) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		writeError(w, http.StatusServiceUnavailable, "request cancelled")
	default:
		s.log.ErrorContext(r.Context(), "api: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

// executionNotFound answers 404 for an execution the log does not hold,
// naming it (cut short: an id of a hundred kilobytes is not echoed back).
func executionNotFound(w http.ResponseWriter, id string) {
	const maxEcho = 200
	if len(id) > maxEcho {
		id = strings.ToValidUTF8(id[:maxEcho], "") + "…"
	}
	writeError(w, http.StatusNotFound, "execution "+strconv.Quote(id)+" not found")
}

// playbookNotFound answers 404 for a playbook name, or a version of it
// (version > 0), the store does not hold.
func playbookNotFound(w http.ResponseWriter, name string, version int64) {
	msg := "playbook " + strconv.Quote(name) + " not found"
	if version > 0 {
		msg = "playbook " + strconv.Quote(name) + " has no version " + strconv.FormatInt(version, 10)
	}
	writeError(w, http.StatusNotFound, msg)
}
