package dsl

import (
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// MaxTemplateNesting bounds how deeply a template nests: brackets,
// parentheses and braces, conditional expressions (a if c else b) and
// block tags ({% if %}, {% for %}, ...) counted together. gonja parses,
// and the engine checks and renders, a template by recursion, so a
// template of a few hundred kilobytes nested tens of thousands deep
// (a playbook anyone allowed to submit one can write) grew a goroutine
// stack past Go's limit: a fatal error no recover catches, which ended
// the server that validated it and the worker that rendered it. Real
// templates nest a handful deep.
const MaxTemplateNesting = 200

// maxTemplateTree bounds the depth of a parsed template's node tree,
// which a chain of operators (1 + 1 + ... , a.b.c...) deepens by one per
// operator without nesting anything: the walk that checks the tree and
// the render recurse through it. Each level of MaxTemplateNesting takes a
// few nodes, so this leaves every template within it room.
const maxTemplateTree = 8 * MaxTemplateNesting

// blockTags are the tags that open a block their end tag closes.
var blockTags = map[string]bool{
	"if": true, "for": true, "macro": true, "call": true, "filter": true,
	"with": true, "block": true, "autoescape": true, "trans": true,
}

// tooDeeplyNested returns the token of src at which its nesting passes
// MaxTemplateNesting, or nil. It reads src's tokens only (gonja's lexer
// does not recurse), so it runs before the parser does.
func tooDeeplyNested(src string, cfg *config.Config) *tokens.Token {
	s := tokens.LexAll(src, cfg)
	// depth counts the open brackets and conditional expressions of the
	// current tag, conds how many conditionals are open at each bracket
	// level (a conditional's else branch ends with its level, or a comma).
	depth, blocks := 0, 0
	conds := []int{0}
	afterBlockBegin := false
	for ; !s.End(); s.Next() {
		t := s.Current()
		opensBlock := false
		switch t.Type {
		case tokens.BlockBegin:
			opensBlock = true
		case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
			depth++
			conds = append(conds, 0)
		case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
			if top := len(conds) - 1; top > 0 {
				depth -= 1 + conds[top]
				conds = conds[:top]
			}
		case tokens.Comma:
			depth -= conds[len(conds)-1]
			conds[len(conds)-1] = 0
		case tokens.VariableEnd, tokens.BlockEnd:
			// An expression ends with its tag: what it left open is the
			// parser's syntax error to report.
			depth, conds = 0, append(conds[:0], 0)
		case tokens.Name:
			switch {
			case afterBlockBegin && blockTags[t.Val]:
				blocks++
			case afterBlockBegin && strings.HasPrefix(t.Val, "end"):
				blocks = max(blocks-1, 0)
			case !afterBlockBegin && t.Val == "if":
				// a if c else b: the else branch is parsed by recursion.
				depth++
				conds[len(conds)-1]++
			}
		}
		afterBlockBegin = opensBlock
		if depth+blocks > MaxTemplateNesting {
			return t
		}
	}
	return nil
}

// nestingDiagnostic is the error of a template nested deeper than
// MaxTemplateNesting (at line:col of the template, when known).
func nestingDiagnostic(src string, pos Pos, line, col int) *Diagnostic {
	return &Diagnostic{Pos: adjustPos(pos, line, col),
		Message: fmt.Sprintf("template %q nests more than %d deep (brackets, conditional expressions, block tags and chained operators; dsl.MaxTemplateNesting)", snippet(src), MaxTemplateNesting)}
}
