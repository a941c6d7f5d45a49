// Package keyscan reads, from a tool package's Go source, the keys of
// the task configuration its code reads, so that each built-in tool's
// test can hold its tools.ConfigKeyLister list to the code: a key the
// code reads but the list lacks would make engine.Lint warn about a key
// that works, and a listed key the code no longer reads would hide a
// typo.
//
// The configuration is recognised by name — an identifier cfg or config,
// or a selector ending in .Config (call.Config) — and read through:
//
//	conv.String(cfg, "a", "b"), conv.First(cfg, "a", "b")
//	conv.Alias(cfg)                         tools.AliasKeys()
//	proc.WithTimeout(ctx, cfg)              proc.TimeoutKeys
//	cfg["a"]
//	for _, k := range []string{"a", "b"} { ... cfg[k] ... }
//
// A function of the same package that the configuration is handed to
// must name its parameter cfg or config to be read. Any other use the
// scanner cannot read (ranging over the configuration,
// indexing it with a computed key, handing it to another package) is
// reported as a problem rather than guessed at.
package keyscan

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/internal/proc"
)

// Keys returns the configuration keys the non-test Go files of dir read,
// sorted, and the uses it could not read.
func Keys(dir string) (keys []string, problems []string, err error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	found := map[string]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, nil, err
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			return nil, nil, err
		}
		s := &scan{fset: fset, found: found, imports: map[string]bool{}}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			s.imports[name] = true
		}
		ast.Inspect(f, s.visit)
		problems = append(problems, s.problems...)
	}
	for k := range found {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, problems, nil
}

type scan struct {
	fset     *token.FileSet
	found    map[string]bool
	imports  map[string]bool // the file's package names
	problems []string
	// handled marks configuration expressions a recognised read used.
	handled map[ast.Expr]bool
}

func isConfig(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "cfg" || e.Name == "config"
	case *ast.SelectorExpr:
		return e.Sel.Name == "Config"
	}
	return false
}

func (s *scan) problem(n ast.Node, format string, args ...any) {
	s.problems = append(s.problems, s.fset.Position(n.Pos()).String()+": "+fmt.Sprintf(format, args...))
}

func (s *scan) mark(e ast.Expr) {
	if s.handled == nil {
		s.handled = map[ast.Expr]bool{}
	}
	s.handled[e] = true
}

// literals adds the string literals of es, reporting any other expression.
func (s *scan) literals(es []ast.Expr) {
	for _, e := range es {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			s.problem(e, "configuration key is not a string literal")
			continue
		}
		k, _ := strconv.Unquote(lit.Value)
		s.found[k] = true
	}
}

func (s *scan) visit(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.CallExpr:
		s.call(n)
	case *ast.RangeStmt:
		if isConfig(n.X) {
			s.problem(n, "ranges over the configuration: its keys are open")
			s.mark(n.X)
		}
		s.rangeKeys(n)
	case *ast.IndexExpr:
		if isConfig(n.X) && !s.handled[n.X] {
			s.mark(n.X)
			if lit, ok := n.Index.(*ast.BasicLit); ok {
				s.literals([]ast.Expr{lit})
			} else {
				s.problem(n, "configuration indexed with a computed key")
			}
		}
	}
	return true
}

func (s *scan) call(c *ast.CallExpr) {
	// pkg names a function of another package; calls within the
	// package are read where the callee indexes its cfg parameter.
	pkg := ""
	if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
		if id, ok := sel.X.(*ast.Ident); ok && s.imports[id.Name] {
			pkg = id.Name + "." + sel.Sel.Name
		}
	}
	for i, a := range c.Args {
		if !isConfig(a) {
			continue
		}
		s.mark(a)
		switch pkg {
		case "conv.String", "conv.First":
			if i == 0 {
				s.literals(c.Args[1:])
			}
		case "conv.Alias":
			for _, k := range tools.AliasKeys() {
				s.found[k] = true
			}
		case "proc.WithTimeout":
			for _, k := range proc.TimeoutKeys {
				s.found[k] = true
			}
		case "":
		default:
			s.problem(c, "configuration handed to %s, which keyscan cannot read", pkg)
		}
	}
}

// rangeKeys reads `for _, k := range []string{...}` loops whose body
// indexes the configuration with k.
func (s *scan) rangeKeys(r *ast.RangeStmt) {
	lit, ok := r.X.(*ast.CompositeLit)
	if !ok {
		return
	}
	v, ok := r.Value.(*ast.Ident)
	if !ok {
		return
	}
	uses := false
	ast.Inspect(r.Body, func(n ast.Node) bool {
		ix, ok := n.(*ast.IndexExpr)
		if !ok || !isConfig(ix.X) {
			return true
		}
		if id, ok := ix.Index.(*ast.Ident); ok && id.Name == v.Name {
			uses = true
			s.mark(ix.X)
		}
		return true
	})
	if uses {
		s.literals(lit.Elts)
	}
}

// Check fails t unless listed (a tool's ConfigKeys) holds exactly the
// keys the non-test Go files of dir read, and every use of the
// configuration there could be read.
func Check(t testing.TB, dir string, listed []string) {
	t.Helper()
	read, problems, err := Keys(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("keyscan: %s", p)
	}
	have := slices.Sorted(slices.Values(listed))
	if !slices.Equal(slices.Compact(have), read) {
		t.Errorf("ConfigKeys lists %q, the code reads %q", have, read)
	}
	if len(slices.Compact(slices.Clone(have))) != len(listed) {
		t.Errorf("ConfigKeys lists a key twice: %q", listed)
	}
}
