package dsl

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Defaults of Limits.
const (
	// DefaultMaxRenderBytes bounds a template's text output and every
	// string or list it builds.
	DefaultMaxRenderBytes = 16 << 20
	// DefaultMaxRange bounds range(), as Jinja's sandbox does.
	DefaultMaxRange = 100_000
	// DefaultRenderTimeout bounds one render.
	DefaultRenderTimeout = 2 * time.Second
)

// ErrRenderLimit is wrapped by the error of a render that went past its
// Limits.
var ErrRenderLimit = errors.New("template render limit")

// Limits bound what rendering one template may do, so that a template a
// stranger wrote cannot stall the engine or exhaust its memory. The zero
// value of a field means its default.
//
// The bounds are checked as the template works: whenever it writes
// output, calls range(), combines values with *, + or ~, or calls a
// filter that pads or batches (center, indent, batch, slice). A template
// that loops over data it was given without doing any of these (nested
// for loops with empty bodies) is bounded by the size of that data only.
type Limits struct {
	// MaxBytes bounds a text template's output and every string or list
	// that *, + and ~ build. Defaults to DefaultMaxRenderBytes (16 MiB).
	MaxBytes int
	// MaxRange bounds the length of range(...) and of a list + builds.
	// Defaults to DefaultMaxRange (100,000).
	MaxRange int
	// Timeout bounds one render. Defaults to DefaultRenderTimeout (2s).
	Timeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxRenderBytes
	}
	if l.MaxRange <= 0 {
		l.MaxRange = DefaultMaxRange
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultRenderTimeout
	}
	return l
}

// limitsRef is shared by a playbook and every template compiled for it,
// so Playbook.SetLimits reaches them all.
type limitsRef struct{ p atomic.Pointer[Limits] }

func (r *limitsRef) get() Limits {
	if r != nil {
		if l := r.p.Load(); l != nil {
			return *l
		}
	}
	return Limits{}.withDefaults()
}

// SetLimits bounds every render of the playbook's templates from now on
// (see Limits). A host sets it once after parsing; the engine sets its
// Config's.
func (p *Playbook) SetLimits(l Limits) {
	if p.limits == nil {
		return
	}
	l = l.withDefaults()
	p.limits.p.Store(&l)
}

// budget is one render's share of its Limits: the variable templates that
// need it find under budgetVar in their context.
type budget struct {
	Limits
	deadline time.Time
	// err is the first limit the render went past: gonja's error chain
	// loses it, so the render reports it from here.
	err error
}

const budgetVar = "__cursorflow_render_budget"

func newBudget(l Limits) *budget {
	return &budget{Limits: l, deadline: time.Now().Add(l.Timeout)}
}

func (b *budget) check() error {
	if time.Now().After(b.deadline) {
		return b.fail(fmt.Errorf("%w: rendering took longer than %s", ErrRenderLimit, b.Timeout))
	}
	return nil
}

func (b *budget) size(n int, what string) error {
	if n > b.MaxBytes {
		return b.fail(fmt.Errorf("%w: %s of %d bytes would exceed %d", ErrRenderLimit, what, n, b.MaxBytes))
	}
	return b.check()
}

func (b *budget) fail(err error) error {
	if b.err == nil {
		b.err = err
	}
	return err
}

// budgetOf finds the render's budget; a template compiled outside a
// render that sets one gets the defaults.
func budgetOf(e *exec.Evaluator) *budget {
	if b, ok := renderVar(e, budgetVar).(*budget); ok {
		return b
	}
	return newBudget(Limits{}.withDefaults())
}

// renderVar is the value of name in the context of the render e
// evaluates, nil when there is none (a filter called outside a render).
func renderVar(e *exec.Evaluator, name string) any {
	if e == nil || e.Environment == nil || e.Environment.Context == nil {
		return nil
	}
	v, _ := e.Environment.Context.Get(name)
	return v
}

// limitedWriter is a text render's output: it refuses to grow past the
// budget and checks the deadline on every write, which stops a loop that
// writes.
type limitedWriter struct {
	strings.Builder
	b *budget
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if err := w.b.size(w.Len()+len(p), "output"); err != nil {
		return 0, err
	}
	return w.Builder.Write(p)
}

func (w *limitedWriter) WriteString(s string) (int, error) {
	if err := w.b.size(w.Len()+len(s), "output"); err != nil {
		return 0, err
	}
	return w.Builder.WriteString(s)
}

// rangeFunction is range([start, ]stop[, step]) returning a list bounded
// by the budget. (gonja's own feeds a channel from a goroutine, which
// leaks when the range is not read to its end, and has no bound.)
func rangeFunction(e *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	b := budgetOf(e)
	if err := b.check(); err != nil {
		return exec.AsValue(err)
	}
	start, stop, step := 0, 0, 1
	for _, a := range params.Args {
		if !a.IsInteger() {
			return exec.AsValue(errors.New("range: expected signature is [start, ]stop[, step] where all arguments are integers"))
		}
	}
	switch len(params.Args) {
	case 1:
		stop = params.Args[0].Integer()
	case 2:
		start, stop = params.Args[0].Integer(), params.Args[1].Integer()
	case 3:
		start, stop, step = params.Args[0].Integer(), params.Args[1].Integer(), params.Args[2].Integer()
	default:
		return exec.AsValue(errors.New("range: expected signature is [start, ]stop[, step] where all arguments are integers"))
	}
	if step == 0 {
		return exec.AsValue(errors.New("range: step cannot be 0"))
	}
	n := 0
	if step > 0 && stop > start {
		n = (stop - start + step - 1) / step
	} else if step < 0 && stop < start {
		n = (start - stop - step - 1) / -step
	}
	if n > b.MaxRange {
		return exec.AsValue(b.fail(fmt.Errorf("%w: range of %d items exceeds %d", ErrRenderLimit, n, b.MaxRange)))
	}
	out := make([]any, n)
	for i := range out {
		out[i] = int64(start + i*step)
	}
	return exec.AsValue(out)
}

// Guarded binary operators: the parser replaces `a * b`, `a + b` and
// `a ~ b` by `a | <filter>(b)` (jinja.go), which compute the same values as
// gonja but refuse to build a string or list past the budget.
const (
	filterMul    = "__cursorflow_mul"
	filterAdd    = "__cursorflow_add"
	filterConcat = "__cursorflow_concat"
)

func guardedOperators() map[string]exec.FilterFunction {
	return map[string]exec.FilterFunction{
		filterMul: func(e *exec.Evaluator, l *exec.Value, params *exec.VarArgs) *exec.Value {
			r := arg(params, 0, "")
			if l.IsError() || r == nil || r.IsError() {
				return errOr(l, r)
			}
			l, r = pyNumber(l), pyNumber(r)
			if r.IsString() || r.IsList() {
				l, r = r, l // 3 * 'ab' is 'ab' * 3
			}
			b := budgetOf(e)
			switch {
			case l.IsString() || l.IsList():
				if !r.IsInteger() {
					return unsupportedOperands("*", l, r)
				}
				n := max(r.Integer(), 0)
				if l.IsList() {
					if n > 0 && l.Len() > b.MaxRange/n {
						return exec.AsValue(b.fail(fmt.Errorf("%w: list repeated %d times would exceed %d items", ErrRenderLimit, n, b.MaxRange)))
					}
					if err := b.check(); err != nil {
						return exec.AsValue(err)
					}
					out := make([]any, 0, l.Len()*n)
					for range n {
						for i := 0; i < l.Len(); i++ {
							out = append(out, l.Index(i).Interface())
						}
					}
					return exec.AsValue(out)
				}
				if len(l.String()) > 0 && n > b.MaxBytes/len(l.String()) {
					return exec.AsValue(b.fail(fmt.Errorf("%w: string repeated %d times would exceed %d bytes", ErrRenderLimit, n, b.MaxBytes)))
				}
				if err := b.check(); err != nil {
					return exec.AsValue(err)
				}
				return exec.AsValue(strings.Repeat(l.String(), n))
			case (!l.IsNumber() && !l.IsNil()) || (!r.IsNumber() && !r.IsNil()):
				return unsupportedOperands("*", l, r)
			case l.IsFloat() || r.IsFloat():
				return exec.AsValue(l.Float() * r.Float())
			}
			return exec.AsValue(mulInt(int64(l.Integer()), int64(r.Integer())))
		},
		filterAdd: func(e *exec.Evaluator, l *exec.Value, params *exec.VarArgs) *exec.Value {
			r := arg(params, 0, "")
			if l.IsError() || r == nil || r.IsError() {
				return errOr(l, r)
			}
			l, r = pyNumber(l), pyNumber(r)
			b := budgetOf(e)
			switch {
			case l.IsList():
				if !r.IsList() {
					return exec.AsValue(fmt.Errorf("unable to concatenate list to %s", r.String()))
				}
				if n := l.Len() + r.Len(); n > b.MaxRange {
					return exec.AsValue(b.fail(fmt.Errorf("%w: list of %d items would exceed %d", ErrRenderLimit, n, b.MaxRange)))
				}
				if err := b.check(); err != nil {
					return exec.AsValue(err)
				}
				out := make([]any, 0, l.Len()+r.Len())
				for i := 0; i < l.Len(); i++ {
					out = append(out, l.Index(i).Interface())
				}
				for i := 0; i < r.Len(); i++ {
					out = append(out, r.Index(i).Interface())
				}
				return exec.AsValue(out)
			case l.IsString() && (r.IsString() || r.IsNil()), l.IsNil() && r.IsString():
				// Undefined (None) adds as the empty string here, and
				// as 0 to a number: the engine's leniency about
				// undefined names, where Jinja2 raises.
				ls, rs := str(l), str(r)
				if err := b.size(len(ls)+len(rs), "string"); err != nil {
					return exec.AsValue(err)
				}
				return exec.AsValue(ls + rs)
			case (!l.IsNumber() && !l.IsNil()) || (!r.IsNumber() && !r.IsNil()):
				return unsupportedOperands("+", l, r)
			case l.IsFloat() || r.IsFloat():
				return exec.AsValue(l.Float() + r.Float())
			}
			return exec.AsValue(addInt(int64(l.Integer()), int64(r.Integer())))
		},
		filterConcat: func(e *exec.Evaluator, l *exec.Value, params *exec.VarArgs) *exec.Value {
			r := arg(params, 0, "")
			if l.IsError() || r == nil || r.IsError() {
				return errOr(l, r)
			}
			ls, rs := l.String(), r.String()
			if err := budgetOf(e).size(len(ls)+len(rs), "string"); err != nil {
				return exec.AsValue(err)
			}
			return exec.AsValue(ls + rs)
		},
	}
}

func errOr(l, r *exec.Value) *exec.Value {
	if l.IsError() {
		return l
	}
	if r == nil {
		return exec.AsValue(errors.New("missing operand"))
	}
	return r
}

// sizedFilters are gonja filters whose integer arguments set the size of
// what they build (a width, a batch length): guarded by the budget.
var sizedFilters = []string{"center", "indent", "batch", "slice"}

func guardSized(name string, fn exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		b := budgetOf(e)
		if params != nil {
			for _, a := range params.Args {
				if a != nil && a.IsInteger() && a.Integer() > b.MaxBytes {
					return exec.AsValue(b.fail(fmt.Errorf("%w: %s(%d) exceeds %d", ErrRenderLimit, name, a.Integer(), b.MaxBytes)))
				}
			}
			for _, a := range params.KwArgs {
				if a != nil && a.IsInteger() && a.Integer() > b.MaxBytes {
					return exec.AsValue(b.fail(fmt.Errorf("%w: %s(%d) exceeds %d", ErrRenderLimit, name, a.Integer(), b.MaxBytes)))
				}
			}
		}
		if err := b.check(); err != nil {
			return exec.AsValue(err)
		}
		return fn(e, in, params)
	}
}
