package dsl

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// A playbook's template nested tens of thousands deep (a few hundred
// kilobytes, well within a server's request limit) grew the goroutine
// stack of the parser, the check walk or the render past Go's limit: a
// fatal error that ended the server validating the playbook. Each is
// refused with a diagnostic instead, and templates nested within
// MaxTemplateNesting still compile and render.
func TestTemplateNestingBounded(t *testing.T) {
	// A stack overflow is fatal, not a test failure: lower the limit from
	// 1 GB so that a regression ends the run at once rather than after
	// growing a gigabyte of stack.
	defer debug.SetMaxStack(debug.SetMaxStack(256 << 20))
	nest := func(n int, open, inner, close string) string {
		return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
	}
	deep := 100_000
	for name, build := range map[string]func(n int) string{
		"parentheses": func(n int) string { return "{{ " + nest(n, "(", "1", ")") + " }}" },
		"lists":       func(n int) string { return "{{ " + nest(n, "[", "1", "]") + " | length }}" },
		"maps":        func(n int) string { return "{{ " + nest(n, "{'a': ", "1", "}") + " | length }}" },
		"calls":       func(n int) string { return "{{ " + nest(n, "dict(a=", "1", ")") + " | length }}" },
		"conditional": func(n int) string { return "{{ " + strings.Repeat("1 if x else ", n) + "2 }}" },
		"if blocks":   func(n int) string { return nest(n, "{% if 1 %}", "x", "{% endif %}") },
		"for blocks":  func(n int) string { return nest(n, "{% for i in [1] %}", "x", "{% endfor %}") },
		"additions":   func(n int) string { return "{{ 1" + strings.Repeat(" + 1", n) + " }}" },
		"attributes":  func(n int) string { return "{{ workload" + strings.Repeat(".a", n) + " | default(1) }}" },
		"and":         func(n int) string { return "{{ 1" + strings.Repeat(" and 1", n) + " }}" },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := CompileTemplate(build(deep), Pos{Line: 3, Col: 7})
			if err == nil || !strings.Contains(err.Error(), "nests more than") {
				t.Fatalf("nested %d deep: got %v, want a nesting diagnostic", deep, err)
			}
			tpl, err := CompileTemplate(build(MaxTemplateNesting-1), Pos{Line: 3, Col: 7})
			if err != nil {
				t.Fatalf("nested %d deep: %v", MaxTemplateNesting-1, err)
			}
			if _, err := tpl.Render(map[string]any{"x": true, "workload": map[string]any{}}); err != nil {
				t.Fatalf("render nested %d deep: %v", MaxTemplateNesting-1, err)
			}
		})
	}
}

// A template of many conditional tags ({{ a if c else b }} repeated, as a
// generated report template has) was rewritten in time quadratic in its
// length: each tag searched the rest of the template again for a {% it
// did not hold, and a playbook of a megabyte held a server's core for
// tens of seconds. Ten times the tags must take about ten times as long,
// not a hundred.
func TestManyConditionalTagsRewriteInLinearTime(t *testing.T) {
	took := func(n int) time.Duration {
		src := strings.Repeat("{{ 1 if a else 2 }}", n)
		best := time.Duration(1<<63 - 1)
		for range 3 {
			start := time.Now()
			rewriteConditionals(src)
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := took(2_000), took(20_000)
	if large > 40*small && large > 50*time.Millisecond {
		t.Fatalf("2,000 tags rewrite in %v, 20,000 in %v: more than linear", small, large)
	}
}

// A template scalar under a YAML anchor was compiled again for each alias
// of it: 100 KB of template named by 300 aliases (a 100 KB request) took a
// server 5 GB and 20 seconds. The aliases share one compilation, so they
// cost what the anchor does.
func TestAliasedTemplateCompiledOnce(t *testing.T) {
	tmpl := strings.Repeat("{{ 1 if a else 2 }}", 1000)
	playbook := func(aliases int) string {
		var b strings.Builder
		b.WriteString("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: m}\nworkload: {a: 1}\nworkflow:\n")
		b.WriteString("  - step: start\n    tool:\n      kind: noop\n      x0: &t '" + tmpl + "'\n")
		for i := 1; i <= aliases; i++ {
			fmt.Fprintf(&b, "      x%d: *t\n", i)
		}
		return b.String()
	}
	allocated := func(src string) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		pb, err := Parse("m.yaml", []byte(src))
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if x := pb.Workflow[0].Tool[0].Config["x1"]; x == nil || x.IsConstant() {
			t.Fatal("x1 is not the template")
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	one, many := allocated(playbook(1)), allocated(playbook(100))
	if many > 3*one {
		t.Fatalf("parsing the template under 1 alias allocated %d bytes, under 100 aliases %d", one, many)
	}
}

// A compiled template holds a hundred times its text and more, and the
// YAML node bound does not see inside a scalar: a 4 MB request holding
// one template took a server 800 MB. The templates of a playbook are
// bounded together, before any is compiled.
func TestPlaybookTemplateTextBounded(t *testing.T) {
	playbook := func(text string) []byte {
		return []byte("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: m}\nworkload: {a: 1}\nworkflow:\n" +
			"  - step: start\n    tool: {kind: noop, x: '" + text + "', y: '" + text + "'}\n")
	}
	tag := "{{ 1 if a else 2 }}"
	over := strings.Repeat(tag, maxTemplateBytes/len(tag)/2+1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Parse("m.yaml", playbook(over))
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "templates hold more than") {
		t.Fatalf("templates of %d bytes: got %v, want them refused", 2*len(over), err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("refusing templates of %d bytes allocated %d bytes", 2*len(over), n)
	}
	// Text that is not a template is not counted.
	if _, err := Parse("m.yaml", playbook(strings.Repeat("plain text ", 100_000))); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("m.yaml", playbook(strings.Repeat(tag, 1000))); err != nil {
		t.Fatal(err)
	}
}
