package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/cursorflow/cursorflow/dsl"
)

// RegisteredPlaybook is POST /v1/playbooks's answer.
type RegisteredPlaybook struct {
	Playbook
	// Created is false when the source equals the latest version's.
	Created bool `json:"created"`
	// Warnings are non-fatal findings (unknown keys, ...).
	Warnings []Problem `json:"warnings,omitempty"`
}

// registerPlaybook validates a YAML body and stores it under its
// metadata.name.
func (s *server) registerPlaybook(w http.ResponseWriter, r *http.Request) {
	src, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	file := r.URL.Query().Get("file")
	if msg := checkFileName(file); msg != "" {
		writeError(w, http.StatusBadRequest, "query parameter file: "+msg)
		return
	}
	if file == "" {
		file = "playbook.yaml"
	}
	pb, err := dsl.Parse(file, src)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(pb.Refusals) > 0 {
		// What every build refuses at run (an unknown key, a field this
		// build does not honour): stored, it could never start.
		probs := make([]*dsl.Diagnostic, len(pb.Refusals))
		for i := range pb.Refusals {
			probs[i] = &pb.Refusals[i]
		}
		writeJSON(w, http.StatusUnprocessableEntity, ErrorBody{
			Error:    fmt.Sprintf("playbook uses what no build runs: %d problem(s)", len(probs)),
			Problems: problemsOf(probs)})
		return
	}
	name := pb.Metadata.Name
	if name == "" {
		writeError(w, http.StatusBadRequest, "playbook has no metadata.name to register it under")
		return
	}
	if !validID(name) {
		// It could never be asked for by name (GET /v1/playbooks/{name}
		// answers 404 for it), and PostgreSQL text holds no NUL byte.
		writeError(w, http.StatusBadRequest, "metadata.name "+strconv.QuoteToASCII(name)+": want UTF-8 text without control characters")
		return
	}
	if len(name) > MaxPlaybookName {
		// PostgresStore's index could not hold it, and the name is not
		// echoed: it may be kilobytes.
		writeError(w, http.StatusBadRequest, fmt.Sprintf("metadata.name is %d bytes: want at most %d", len(name), MaxPlaybookName))
		return
	}
	stored, created, err := s.cfg.Playbooks.Put(r.Context(), name, string(src))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	warns := make([]*dsl.Diagnostic, len(pb.Warnings))
	for i := range pb.Warnings {
		warns[i] = &pb.Warnings[i]
	}
	stored.Source = ""
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		s.log.InfoContext(r.Context(), "playbook registered", "playbook", name, "version", stored.Version)
	}
	out := RegisteredPlaybook{Playbook: stored, Created: created}
	if len(warns) > 0 {
		out.Warnings = problemsOf(warns)
	}
	writeJSON(w, status, out)
}

// PlaybookList is GET /v1/playbooks's answer.
type PlaybookList struct {
	Playbooks []Playbook `json:"playbooks"`
}

func (s *server) listPlaybooks(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Playbooks.List(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if list == nil {
		list = []Playbook{}
	}
	writeJSON(w, http.StatusOK, PlaybookList{Playbooks: list})
}

func (s *server) getPlaybook(w http.ResponseWriter, r *http.Request) {
	version, err := queryInt(r, "version", 0, 1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.PathValue("name")
	if version > MaxPlaybookVersion {
		// No store holds one (PostgreSQL's would refuse the number).
		playbookNotFound(w, name, version)
		return
	}
	pb, err := s.cfg.Playbooks.Get(r.Context(), name, int(version))
	if errors.Is(err, ErrPlaybookNotFound) {
		playbookNotFound(w, name, version)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pb)
}
