package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/tools"
)

// runSink saves out, a successful result, with the sink's tool in the same
// command. It returns out when the sink succeeded, and out turned into an
// error otherwise: the attempt (page, iteration) fails with its sink.
//
// The sink's configuration renders with result (the result's data),
// response (the response body), this and output (the whole result)
// in scope. A postgres sink that names a table and no SQL inserts rows:
// its data (a mapping is one row, a list many), else the response body (a
// list of rows, or one). With mode upsert and key (a column or a list of
// columns) a row whose key exists gets the columns the rows name (INSERT
// ... ON CONFLICT: the others keep their values, nothing is deleted);
// mode replace deletes the rows whose key exists and inserts them anew.
func (w *Worker) runSink(ctx context.Context, cmd *Command, step *dsl.Step, sink *dsl.Sink, view, out map[string]any) map[string]any {
	sv := copyMap(view)
	sv["result"], sv["data"], sv["this"], sv["output"], sv["response"] = out["data"], out["data"], out, out, responseBody(out)
	task := sink.Task
	if task.Kind == "postgres" && task.Config["table"] != nil && task.Config["command"] == nil && task.Config["query"] == nil && task.Config["sql"] == nil {
		sql, err := tableInsert(task, sv, responseBody(out))
		if err != nil {
			return sinkFailed(out, err.Error())
		}
		t := &dsl.Task{Kind: "postgres", Pos: task.Pos, Config: map[string]*dsl.Value{"command": dsl.NewLiteralValue(sql, task.Pos)}}
		for _, k := range []string{"auth", "credential"} {
			if v := task.Config[k]; v != nil {
				t.Config[k] = v
			}
		}
		task = t
	}
	res, field, err := w.runTask(ctx, cmd, step, task, sv, nil, 1, nil, false)
	switch {
	case err != nil:
		return sinkFailed(out, fmt.Sprintf("%s: %v", field, err))
	case res["status"] != tools.StatusSuccess:
		return sinkFailed(out, errorText(res))
	}
	return out
}

func sinkFailed(out map[string]any, msg string) map[string]any {
	c := copyMap(out)
	c["status"] = tools.StatusError
	c["error"] = "sink: " + msg
	return c
}

// tableInsert builds the SQL of a postgres table sink: the rows as one
// JSON literal, spread into the table's columns by
// jsonb_populate_recordset, naming only the columns the rows have so that
// the others keep their defaults.
func tableInsert(task *dsl.Task, scope map[string]any, body any) (string, error) {
	render := func(key string) (any, error) {
		if v := task.Config[key]; v != nil {
			return v.Render(scope)
		}
		return nil, nil
	}
	tableV, err := render("table")
	if err != nil {
		return "", fmt.Errorf("table: %w", err)
	}
	table, _ := tableV.(string)
	if table == "" {
		return "", fmt.Errorf("table must be a name")
	}
	modeV, _ := render("mode")
	mode, _ := modeV.(string)
	keyV, err := render("key")
	if err != nil {
		return "", fmt.Errorf("key: %w", err)
	}
	data := body
	if task.Config["data"] != nil {
		if data, err = render("data"); err != nil {
			return "", fmt.Errorf("data: %w", err)
		}
	}
	var rows []any
	switch d := data.(type) {
	case []any:
		rows = d
	case map[string]any:
		rows = []any{d}
	case nil:
		if task.Config["data"] != nil {
			// A data: template that renders to nothing is a mistake (an
			// undefined name, a missing key), not a load of no rows: the
			// sink would report success and save nothing.
			return "", fmt.Errorf("data rendered to nothing (an undefined name or a null value); a sink saves a row (a mapping) or a list of rows")
		}
		return "SELECT 0", nil
	default:
		return "", fmt.Errorf("data must be a row (a mapping) or a list of rows, got %T", data)
	}
	cols := map[string]bool{}
	for _, r := range rows {
		m, ok := r.(map[string]any)
		if !ok {
			return "", fmt.Errorf("row is %T, want a mapping of column to value", r)
		}
		for k := range m {
			cols[k] = true
		}
	}
	if len(rows) == 0 || len(cols) == 0 {
		return "SELECT 0", nil
	}
	names := make([]string, 0, len(cols))
	for k := range cols {
		names = append(names, quoteIdent(k))
	}
	slices.Sort(names)
	b, err := json.Marshal(rows)
	if err != nil {
		return "", err
	}
	ident := quoteQualified(table)
	src := fmt.Sprintf("jsonb_populate_recordset(NULL::%s, %s::jsonb)", ident, dollarQuote(string(b)))
	list := strings.Join(names, ", ")
	insert := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s", ident, list, list, src)
	switch mode {
	case "", "append", "insert":
		return insert, nil
	case "upsert", "replace":
		keys, err := sinkKeys(keyV)
		if err != nil {
			return "", fmt.Errorf("mode %s needs key, the column (or list of columns) rows are matched on: %w", mode, err)
		}
		qk := make([]string, len(keys))
		isKey := map[string]bool{}
		for i, k := range keys {
			qk[i] = quoteIdent(k)
			isKey[qk[i]] = true
		}
		kl := strings.Join(qk, ", ")
		if mode == "replace" {
			// The rows whose key exists are deleted, then all inserted:
			// columns the rows do not name go back to their defaults.
			on := make([]string, len(qk))
			for i, k := range qk {
				on[i] = fmt.Sprintf("t.%s = s.%s", k, k)
			}
			return fmt.Sprintf("DELETE FROM %s t USING %s s WHERE %s; %s", ident, src, strings.Join(on, " AND "), insert), nil
		}
		// INSERT ... ON CONFLICT, as NoETL's sink: a row whose key exists
		// gets the columns the rows name, the others keep their values,
		// and nothing is deleted (no cascade). Of the rows sharing a key,
		// the last wins, as if saved one after the other.
		var set []string
		for _, n := range names {
			if !isKey[n] {
				set = append(set, fmt.Sprintf("%s = EXCLUDED.%s", n, n))
			}
		}
		action := "DO NOTHING"
		if len(set) > 0 {
			action = "DO UPDATE SET " + strings.Join(set, ", ")
		}
		return fmt.Sprintf("INSERT INTO %s (%s) SELECT DISTINCT ON (%s) %s FROM %s WITH ORDINALITY AS s ORDER BY %s, s.ordinality DESC ON CONFLICT (%s) %s",
			ident, list, kl, list, src, kl, kl, action), nil
	}
	return "", fmt.Errorf("bad mode %q (want append, upsert or replace)", mode)
}

// sinkKeys reads a sink's key: a column name, or a list of them.
func sinkKeys(v any) ([]string, error) {
	switch k := v.(type) {
	case string:
		if k != "" {
			return []string{k}, nil
		}
	case []any:
		keys := make([]string, 0, len(k))
		for _, x := range k {
			s, ok := x.(string)
			if !ok || s == "" {
				return nil, fmt.Errorf("key %v: want column names", v)
			}
			keys = append(keys, s)
		}
		if len(keys) > 0 {
			return keys, nil
		}
	}
	return nil, fmt.Errorf("key is %v", v)
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func quoteQualified(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = quoteIdent(p)
	}
	return strings.Join(parts, ".")
}

// dollarQuote quotes s as a dollar-quoted literal whose tag s does not
// contain, so no character of s needs escaping.
func dollarQuote(s string) string {
	tag := "$cf$"
	for i := 0; strings.Contains(s, tag); i++ {
		tag = fmt.Sprintf("$cf%d$", i)
	}
	return tag + s + tag
}
