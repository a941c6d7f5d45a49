package dsl

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Python's arithmetic, as Jinja2 has it: a bool is the int 0 or 1, ints
// do not wrap around (a result past int64 becomes a float, the nearest
// this engine has to Python's big ints), and a string meets a number only
// in repetition: 'a' + 1 is an error, not "a1".

// pyNumber returns v as Python's arithmetic reads it: a bool is 0 or 1.
func pyNumber(v *exec.Value) *exec.Value {
	if v != nil && v.IsBool() {
		if v.Bool() {
			return exec.AsValue(int64(1))
		}
		return exec.AsValue(int64(0))
	}
	return v
}

// pyType names v's type as Python's error messages do.
func pyType(v *exec.Value) string {
	switch {
	case v == nil || v.IsNil():
		return "NoneType"
	case v.IsBool():
		return "bool"
	case v.IsInteger():
		return "int"
	case v.IsFloat():
		return "float"
	case v.IsString():
		return "str"
	case v.IsList():
		return "list"
	case v.IsDict():
		return "dict"
	}
	return "object"
}

func unsupportedOperands(op string, l, r *exec.Value) *exec.Value {
	return exec.AsValue(fmt.Errorf("unsupported operand types for %s: '%s' and '%s'", op, pyType(l), pyType(r)))
}

// addInt, subInt and mulInt are int64 arithmetic that turns to float64
// where int64 would wrap around.
func addInt(a, b int64) any {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return float64(a) + float64(b)
	}
	return s
}

func subInt(a, b int64) any {
	s := a - b
	if (b < 0 && s < a) || (b > 0 && s > a) {
		return float64(a) - float64(b)
	}
	return s
}

func mulInt(a, b int64) any {
	if a == 0 || b == 0 {
		return int64(0)
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return float64(a) * float64(b)
	}
	return p
}

// filterSub is Python's a - b; like + it takes undefined (None) as 0.
func filterSub(_ *exec.Evaluator, l *exec.Value, params *exec.VarArgs) *exec.Value {
	r := arg(params, 0, "")
	if l.IsError() || r == nil || r.IsError() {
		return errOr(l, r)
	}
	l, r = pyNumber(l), pyNumber(r)
	if (!l.IsNumber() && !l.IsNil()) || (!r.IsNumber() && !r.IsNil()) {
		return unsupportedOperands("-", l, r)
	}
	if l.IsFloat() || r.IsFloat() {
		return exec.AsValue(l.Float() - r.Float())
	}
	return exec.AsValue(subInt(int64(l.Integer()), int64(r.Integer())))
}

// filterSum is Jinja2's sum(iterable, attribute=None, start=0), with
// Python's addition: bools count as 0 and 1, ints stay ints, and a value
// that is not a number is an error rather than skipped.
func filterSum(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var attribute string
	if a := arg(params, 0, "attribute"); a != nil && !a.IsNil() {
		attribute = a.String()
	}
	total := exec.AsValue(int64(0))
	if s := arg(params, 1, "start"); s != nil {
		total = pyNumber(s)
	}
	if !total.IsNumber() {
		return fail("sum", fmt.Errorf("start must be a number, not '%s'", pyType(total)))
	}
	if in.IsNil() {
		return total
	}
	if !in.IsList() && !in.IsDict() {
		return fail("sum", fmt.Errorf("'%s' object is not iterable", pyType(in)))
	}
	var err error
	in.Iterate(func(_, _ int, key, value *exec.Value) bool {
		item := key
		if attribute != "" {
			item = attributeOf(key, attribute)
		}
		item = pyNumber(item)
		if !item.IsNumber() {
			err = fmt.Errorf("unsupported operand types for +: '%s' and '%s'", pyType(total), pyType(item))
			return false
		}
		if total.IsFloat() || item.IsFloat() {
			total = exec.AsValue(total.Float() + item.Float())
		} else {
			total = exec.AsValue(addInt(int64(total.Integer()), int64(item.Integer())))
		}
		return true
	}, func() {})
	if err != nil {
		return fail("sum", err)
	}
	return total
}

// attributeOf follows a dotted attribute path (Jinja2's
// environment.getitem for each part, a number indexing a list); a missing
// part gives undefined (nil).
func attributeOf(v *exec.Value, path string) *exec.Value {
	for _, part := range strings.Split(path, ".") {
		if v == nil || v.IsNil() {
			return exec.AsValue(nil)
		}
		var next *exec.Value
		var found bool
		if i, err := strconv.Atoi(part); err == nil && v.IsList() {
			next, found = v.GetItem(i)
		} else {
			next, found = v.GetItem(part)
		}
		if !found {
			return exec.AsValue(nil)
		}
		v = next
	}
	return v
}

// pairsOf returns a mapping's key/value pairs, for a Go map and for a
// dict literal of the template alike (gonja's Items sees only the first).
func pairsOf(v *exec.Value) ([]*exec.Pair, bool) {
	switch d := v.Interface().(type) {
	case exec.Dict:
		return d.Pairs, true
	case *exec.Dict:
		if d == nil {
			return nil, true
		}
		return d.Pairs, true
	}
	if v.IsDict() {
		return v.Items(), true
	}
	return nil, false
}

// filterDictSort is Jinja2's dictsort(value, case_sensitive=false,
// by='key', reverse=false): the (key, value) pairs, sorted.
func filterDictSort(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	caseSensitive, by, reverse := false, "key", false
	if v := arg(params, 0, "case_sensitive"); v != nil {
		caseSensitive = v.IsTrue()
	}
	if v := arg(params, 1, "by"); v != nil {
		by = v.String()
	}
	if v := arg(params, 2, "reverse"); v != nil {
		reverse = v.IsTrue()
	}
	if by != "key" && by != "value" {
		return fail("dictsort", errors.New("you can only sort by either 'key' or 'value'"))
	}
	pairs, ok := pairsOf(in)
	if !ok {
		if in.IsNil() {
			return exec.AsValue([]any{})
		}
		return fail("dictsort", fmt.Errorf("'%s' object has no attribute 'items'", pyType(in)))
	}
	pairs = append([]*exec.Pair(nil), pairs...)
	sortKey := func(p *exec.Pair) *exec.Value {
		if by == "value" {
			return p.Value
		}
		return p.Key
	}
	var cmpErr error
	sort.SliceStable(pairs, func(i, j int) bool {
		c, err := pyCompare(sortKey(pairs[i]), sortKey(pairs[j]), caseSensitive)
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		if reverse {
			return c > 0
		}
		return c < 0
	})
	if cmpErr != nil {
		return fail("dictsort", cmpErr)
	}
	out := make([]any, len(pairs))
	for i, p := range pairs {
		out[i] = []any{p.Key.Interface(), p.Value.Interface()}
	}
	return exec.AsValue(out)
}

// pyCompare orders two values as Python's < does for the types a sort
// meets: numbers (bools among them) with numbers, strings with strings
// (lower-cased unless caseSensitive), None only with None.
func pyCompare(a, b *exec.Value, caseSensitive bool) (int, error) {
	a, b = pyNumber(a), pyNumber(b)
	switch {
	case a.IsInteger() && b.IsInteger():
		return cmpOrdered(a.Integer(), b.Integer()), nil
	case a.IsNumber() && b.IsNumber():
		return cmpOrdered(a.Float(), b.Float()), nil
	case a.IsString() && b.IsString():
		x, y := a.String(), b.String()
		if !caseSensitive {
			x, y = strings.ToLower(x), strings.ToLower(y)
		}
		return strings.Compare(x, y), nil
	case a.IsNil() && b.IsNil():
		return 0, nil
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", pyType(a), pyType(b))
}

func cmpOrdered[T int | float64](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// filterRound is Jinja2's round(value, precision=0, method='common'):
// common is Python's round, which rounds a tie to the even digit
// (2.5 to 2.0) and rounds the float's exact value (2.675 is below the
// tie, so 2.68 is not its round(2)); an int stays the int it is. floor
// and ceil give a float.
func filterRound(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	precision := 0
	if p := arg(params, 0, "precision"); p != nil {
		if !p.IsInteger() {
			return fail("round", fmt.Errorf("precision must be an integer, not '%s'", pyType(p)))
		}
		precision = p.Integer()
	}
	method := "common"
	if m := arg(params, 1, "method"); m != nil {
		method = m.String()
	}
	v := pyNumber(in)
	if in.IsNil() {
		v = exec.AsValue(int64(0))
	}
	if !v.IsNumber() {
		return fail("round", fmt.Errorf("type %s doesn't define __round__ method", pyType(in)))
	}
	switch method {
	case "common":
		if v.IsInteger() && precision >= 0 {
			return v
		}
		return exec.AsValue(roundHalfEven(v.Float(), precision))
	case "floor", "ceil":
		f := math.Floor
		if method == "ceil" {
			f = math.Ceil
		}
		scale := math.Pow10(precision)
		return exec.AsValue(f(v.Float()*scale) / scale)
	}
	return fail("round", errors.New("method must be 'common', 'ceil' or 'floor'"))
}

// roundHalfEven is Python's round(x, ndigits) for a float.
func roundHalfEven(x float64, ndigits int) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	if ndigits >= 0 {
		if ndigits > 17 {
			return x
		}
		// strconv rounds the exact binary value, a tie to even.
		r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'f', ndigits, 64), 64)
		if err != nil {
			return x
		}
		return r
	}
	scale := math.Pow10(-ndigits)
	return math.RoundToEven(x/scale) * scale
}
