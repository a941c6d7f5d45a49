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
// list of rows, or one). With mode upsert and key, rows whose key exists
// are replaced.
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
		key, _ := keyV.(string)
		if key == "" {
			return "", fmt.Errorf("mode %s needs key (the column rows are matched on)", mode)
		}
		k := quoteIdent(key)
		return fmt.Sprintf("DELETE FROM %s t USING %s s WHERE t.%s = s.%s; %s", ident, src, k, k, insert), nil
	}
	return "", fmt.Errorf("bad mode %q (want append or upsert)", mode)
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
