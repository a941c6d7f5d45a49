package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/tools"
)

// CheckCredentials lists the credential aliases pb names that kc does not
// hold: a task's auth (or credential, tools.AliasKeys()) where toolReg's
// tool for its kind reads that key (tools.ConfigKeyLister), and a cursor
// loop's auth. Aliases written as templates are left to run time, as are
// those kc could not look up for another reason than
// tools.ErrCredentialNotFound. Each problem names file:line:col, the step
// and the alias, never a secret.
//
// A host that runs playbooks with a keychain of its own (the cursorflow
// CLI) calls it before Start or Resume: a missing credential is then
// refused before anything runs, instead of failing the execution at the
// step that needs it (a failure a later resume cannot undo). The
// orchestrator of a scale-out deployment does not call it: its workers
// hold the credentials.
func CheckCredentials(ctx context.Context, pb *dsl.Playbook, toolReg *tools.Registry, kc tools.Keychain) []dsl.Diagnostic {
	if pb == nil {
		return []dsl.Diagnostic{{Message: "no playbook (nil)"}}
	}
	var out []dsl.Diagnostic
	missing := func(alias string) bool {
		_, err := kc.Resolve(ctx, alias)
		return errors.Is(err, tools.ErrCredentialNotFound)
	}
	add := func(pos dsl.Pos, what, field, alias string) {
		out = append(out, dsl.Diagnostic{Pos: pos, Message: fmt.Sprintf(
			"%s: %s: credential alias %q is not in the keychain", what, field, alias)})
	}
	eachTask(pb, func(t *dsl.Task, what string, _ taskRole) {
		if toolReg == nil || t.Kind == "" || t.Kind == "workbook" {
			return
		}
		tool, err := toolReg.Lookup(t.Kind)
		if err != nil {
			return // Check reports the kind
		}
		keys, listed := tools.ConfigKeys(tool)
		if !listed {
			return // a tool with open keys may read auth as anything
		}
		for _, k := range tools.AliasKeys() {
			v, ok := t.Config[k]
			if !ok {
				continue
			}
			if !slices.Contains(keys, k) || !v.IsConstant() {
				return
			}
			lit, err := v.Render(nil)
			if err != nil {
				return
			}
			if alias, ok := tools.AliasOf(map[string]any{k: lit}); ok && missing(alias) {
				pos := t.Pos
				if p, ok := t.KeyPos[k]; ok {
					pos = p
				}
				add(pos, what, k, alias)
			}
			return // the first alias key present is the one read
		}
	})
	for _, s := range pb.Workflow {
		if s.Loop == nil || s.Loop.Cursor == nil || s.Loop.Cursor.Auth == nil || !s.Loop.Cursor.Auth.IsConstant() {
			continue
		}
		lit, err := s.Loop.Cursor.Auth.Render(nil)
		if err != nil {
			continue
		}
		if alias := fmt.Sprint(lit); alias != "" && missing(alias) {
			add(s.Loop.Cursor.Pos, "step "+s.Name, "loop.cursor.auth", alias)
		}
	}
	sortByPos(out)
	return out
}
