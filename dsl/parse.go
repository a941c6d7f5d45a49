package dsl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Diagnostic is one problem found in a playbook.
type Diagnostic struct {
	Pos     Pos
	Message string
	// Warning is true for findings that do not make the playbook invalid
	// (unknown keys, for example).
	Warning bool
}

// Error formats the diagnostic as file:line:col: message.
func (d *Diagnostic) Error() string { return d.Pos.String() + ": " + d.Message }

// ErrorList is every error found in one playbook; Parse returns it as its
// error when validation fails. Use errors.As to reach it.
type ErrorList []*Diagnostic

// Error joins the diagnostics, one per line.
func (l ErrorList) Error() string {
	s := ""
	for i, d := range l {
		if i > 0 {
			s += "\n"
		}
		s += d.Error()
	}
	return s
}

// Parse parses and validates a playbook. file names the source in
// positions. On failure the error is an ErrorList holding every problem.
//
// Every problem is reported at once, sorted by position. When the error is
// an ErrorList the returned Playbook is the partial result, useful to
// tools (its Warnings are filled) but not fit to run. Parse never panics.
func Parse(file string, src []byte) (*Playbook, error) {
	d := newDecoder(file, src)
	root, err := parseYAML(src)
	if err != nil {
		d.errAtMsg(d.yamlErrorPos(err), yamlErrorMessage(err))
		return &Playbook{File: file}, d.errs
	}
	if root == nil {
		d.errorAt(Pos{File: file, Line: 1, Col: 1}, "empty document: a playbook needs apiVersion, kind, metadata and workflow")
		return &Playbook{File: file}, d.errs
	}
	if n := countNodes(root, maxNodes+1); n > maxNodes {
		d.errorAt(Pos{File: file, Line: 1, Col: 1}, "the playbook has more than %d YAML nodes (a collection that large belongs in a table or a file the playbook reads)", maxNodes)
		return &Playbook{File: file}, d.errs
	}
	if n := templateBytes(root, maxTemplateBytes+1); n > maxTemplateBytes {
		d.errorAt(Pos{File: file, Line: 1, Col: 1}, "the playbook's templates hold more than %d bytes (large text belongs in a table or a file the playbook reads)", maxTemplateBytes)
		return &Playbook{File: file}, d.errs
	}
	d.readYAML11Bools(root)
	pb := d.playbook(root)
	d.validate(pb)
	// Sort by position and drop repeats (a value reached through several
	// aliases reports its problems once).
	slices.SortStableFunc(d.errs, func(a, b *Diagnostic) int { return a.Pos.Compare(b.Pos) })
	d.errs = slices.CompactFunc(d.errs, func(a, b *Diagnostic) bool { return *a == *b })
	slices.SortStableFunc(d.warns, func(a, b Diagnostic) int { return a.Pos.Compare(b.Pos) })
	pb.Warnings = slices.Compact(d.warns)
	slices.SortStableFunc(d.refusals, func(a, b Diagnostic) int { return a.Pos.Compare(b.Pos) })
	pb.Refusals = slices.Compact(d.refusals)
	slices.SortStableFunc(d.notes, func(a, b Diagnostic) int { return a.Pos.Compare(b.Pos) })
	pb.Notes = d.notes
	if len(d.errs) > 0 {
		return pb, d.errs
	}
	return pb, nil
}

// ParseFile reads and parses the playbook at path. A read failure is
// returned wrapped (errors.Is(err, fs.ErrNotExist) works); parse problems
// are an ErrorList as with Parse.
func ParseFile(path string) (*Playbook, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dsl: read playbook: %w", err)
	}
	return Parse(path, src)
}

// parseYAML reads the single YAML document in src. It returns a nil node
// for an empty document.
// maxNodes bounds the YAML nodes of one playbook as written: each costs
// the decoder and the validation hundreds of bytes, so a few megabytes of
// a flow list ([0, 1, 2, ...]) would cost hundreds of megabytes. It is
// well above a collection loop's item limit.
const maxNodes = 1 << 18

// countNodes counts the nodes of the tree below n, stopping past limit.
func countNodes(n *yaml.Node, limit int) int {
	count := 0
	stack := []*yaml.Node{n}
	for len(stack) > 0 && count < limit {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		count++
		stack = append(stack, x.Content...)
	}
	return count
}

// maxTemplateBytes bounds the text of a playbook's templates (its
// scalars holding {{ or {%) together, each counted once however many
// aliases name it. A compiled template holds a hundred times its text
// or more in tokens and nodes, which the YAML node bound does not see: a
// request of 4 MB holding one template took a server 800 MB. A playbook
// over a megabyte cannot be sent to NATS workers anyway (max_payload).
const maxTemplateBytes = 1 << 20

// templateBytes sums the lengths of the template scalars below n (not
// following aliases), stopping past limit.
func templateBytes(n *yaml.Node, limit int) int {
	sum := 0
	stack := []*yaml.Node{n}
	for len(stack) > 0 && sum < limit {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x.Kind == yaml.ScalarNode && IsTemplateSource(x.Value) {
			sum += len(x.Value)
		}
		stack = append(stack, x.Content...)
	}
	return sum
}

func parseYAML(src []byte) (root *yaml.Node, err error) {
	// The YAML library reports malformed input through its own recovered
	// panics; guard against any that escape so that Parse never panics.
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("yaml: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("yaml: line %d: a playbook file holds one YAML document, found another", extra.Line)
	} else if !errors.Is(err, io.EOF) {
		return nil, err
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return doc.Content[0], nil
	}
	return &doc, nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+): `)

// yamlParserProblems are the YAML library's parser error messages, whose
// line numbers are 0-based.
var yamlParserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected <document start>",
	"did not find expected '-' indicator",
	"did not find expected key",
	"did not find expected node content",
	"did not find expected <stream-start>",
	"found duplicate %YAML directive",
	"found duplicate %TAG directive",
	"found incompatible YAML document",
}

// yamlErrorPos extracts the line of a YAML syntax error. The YAML library
// reports lines only, so the column is that of the line's first
// non-blank character.
func (d *decoder) yamlErrorPos(err error) Pos {
	p := Pos{File: d.file, Line: 1, Col: 1}
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		if l, convErr := strconv.Atoi(m[1]); convErr == nil && l > 0 {
			p.Line = l
			// The library reports parser (not scanner) errors with a
			// 0-based line; its scanner errors are 1-based.
			for _, pm := range yamlParserProblems {
				if strings.HasSuffix(msg, pm) {
					p.Line++
					break
				}
			}
		}
	}
	line := d.sourceLine(p.Line)
	if trimmed := strings.TrimLeft(line, " \t"); trimmed != "" {
		p.Col = len(line) - len(trimmed) + 1
	}
	return p
}

func yamlErrorMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = yamlLineRE.ReplaceAllString(msg, "")
	return "YAML syntax error: " + msg
}
