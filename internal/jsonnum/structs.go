package jsonnum

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/cursorflow/cursorflow/internal/jsonvalid"
)

// unmarshalFast decodes the JSON object data into the struct rv (a
// settable struct value, zero on entry) member by member, without
// encoding/json's Decoder: strings, booleans, integers, floats, maps of
// plain values and values of type any are read directly (the latter two
// with the plain parser Decode uses); a field of any other type gets its
// member through Unmarshal, which is what encoding/json does with it. ok
// is false for anything it is not sure to decode exactly as the Decoder
// would (invalid JSON, a key with escapes, a key given twice, a value of
// the wrong type, a struct whose layout it does not read: embedded
// fields, the string option, one that decodes itself): the caller then
// zeroes rv and decodes the ordinary way, which also words the error.
//
// An event payload is a small object decoded once per fold; through the
// Decoder a 100-byte step.completed took 7 µs and 40 allocations.
func unmarshalFast(data []byte, rv reflect.Value) bool {
	plan := planOf(rv.Type())
	return plan != nil && jsonvalid.Valid(data) && plan.fill(data, rv)
}

// fill is unmarshalFast on data known to be valid JSON.
func (plan *structPlan) fill(data []byte, rv reflect.Value) bool {
	// seen marks the fields a member has filled.
	var seenBuf [16]bool
	seen := seenBuf[:]
	if len(plan.fields) > len(seenBuf) {
		seen = make([]bool, len(plan.fields))
	}
	err := Members(data, func(key string, raw []byte) error {
		i, found := plan.field(key)
		if !found {
			if !ascii(key) {
				return errNotPlain // it may fold into a field's name
			}
			return nil // unknown members are ignored, as the Decoder does
		}
		if seen[i] {
			// A repeated key decodes into what the first one left (a map
			// merges): the Decoder's business.
			return errNotPlain
		}
		seen[i] = true
		if !plan.fields[i].store(rv.Field(plan.fields[i].index), raw) {
			return errNotPlain
		}
		return nil
	})
	return err == nil
}

// structPlan is how unmarshalFast fills one struct type.
type structPlan struct {
	fields []fieldPlan
	// byName finds a field by its JSON name; a key that matches none
	// exactly may match one case-insensitively (field).
	byName map[string]int
}

// field returns the field a member's key names: the one with that name,
// else the first whose name equals it under Unicode case folding, as
// encoding/json matches keys.
func (plan *structPlan) field(key string) (int, bool) {
	if i, ok := plan.byName[key]; ok {
		return i, true
	}
	if !ascii(key) {
		// The names are ASCII (plainName); a key beyond it that folds
		// into one is the Decoder's to match.
		return 0, false
	}
	for i, f := range plan.fields {
		if strings.EqualFold(f.name, key) {
			return i, true
		}
	}
	return 0, false
}

// fieldPlan is one field a struct's JSON members land in.
type fieldPlan struct {
	name  string
	index int
	kind  fieldKind
	// bits is an integer or float field's size.
	bits int
	// elem is how a slice field's elements are read (fieldSlice).
	elem *fieldPlan
}

type fieldKind uint8

const (
	// fieldOther goes through Unmarshal (a pointer, a slice, a struct, a
	// named type, a type with an UnmarshalJSON...).
	fieldOther fieldKind = iota
	fieldString
	fieldBool
	fieldInt
	fieldFloat
	fieldAny
	fieldMap    // map[string]any
	fieldStruct // a struct with a plan of its own
	fieldSlice  // a slice of elements read one of the ways above
	fieldPtr    // a pointer to a value read one of the ways above
)

// store decodes raw, a valid JSON value, into f, which is zero. It
// reports false where the Decoder would fail or do something else.
func (fp fieldPlan) store(f reflect.Value, raw []byte) bool {
	null := raw[0] == 'n'
	switch fp.kind {
	case fieldString:
		if null {
			return true // the Decoder leaves a string as it is
		}
		if raw[0] != '"' {
			return false
		}
		p := plainParser{data: raw}
		s, ok := p.text()
		if !ok || p.i != len(raw) {
			return false
		}
		f.SetString(s)
	case fieldBool:
		switch raw[0] {
		case 'n':
		case 't':
			f.SetBool(true)
		case 'f':
		default:
			return false
		}
	case fieldInt:
		if null {
			return true
		}
		n, err := strconv.ParseInt(string(raw), 10, fp.bits)
		if err != nil {
			return false
		}
		f.SetInt(n)
	case fieldFloat:
		if null {
			return true
		}
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return false
		}
		x, err := strconv.ParseFloat(string(raw), fp.bits)
		if err != nil {
			return false
		}
		f.SetFloat(x)
	case fieldAny, fieldMap:
		if null {
			return true // nil, as it is
		}
		v, ok := decodePlain(raw, nil)
		if !ok {
			return false
		}
		if fp.kind == fieldMap {
			m, isMap := v.(map[string]any)
			if !isMap {
				return false
			}
			f.Set(reflect.ValueOf(m))
			return true
		}
		f.Set(reflect.ValueOf(&v).Elem())
	case fieldStruct:
		if null {
			return true
		}
		return raw[0] == '{' && planOf(f.Type()).fill(raw, f)
	case fieldPtr:
		if null {
			return true // nil
		}
		x := reflect.New(f.Type().Elem())
		if !fp.elem.store(x.Elem(), raw) {
			return false
		}
		f.Set(x)
	case fieldSlice:
		if null {
			return true // nil
		}
		if raw[0] != '[' {
			return false
		}
		elems, ok := elements(raw)
		if !ok {
			return false
		}
		// Non-nil even when empty, as the Decoder makes it.
		list := reflect.MakeSlice(f.Type(), len(elems), len(elems))
		for i, e := range elems {
			if !fp.elem.store(list.Index(i), e) {
				return false
			}
		}
		f.Set(list)
	default:
		return Unmarshal(raw, f.Addr().Interface()) == nil
	}
	return true
}

// elements returns the elements of the JSON array raw (valid JSON), each
// as raw JSON.
func elements(raw []byte) ([][]byte, bool) {
	var out [][]byte
	i := jsonvalid.Space(raw, 1)
	if i < len(raw) && raw[i] == ']' {
		return out, true
	}
	for i < len(raw) {
		j, ok := skipValue(raw, i)
		if !ok {
			return nil, false
		}
		out = append(out, raw[i:j])
		i = jsonvalid.Space(raw, j)
		if i >= len(raw) {
			break
		}
		switch raw[i] {
		case ',':
			i = jsonvalid.Space(raw, i+1)
		case ']':
			return out, true
		default:
			return nil, false
		}
	}
	return nil, false
}

// plans holds each struct type's plan (nil: unmarshalFast does not read
// the type). It is a memo of what a type's declaration says, as
// encoding/json keeps one: nothing it holds changes what a call decodes.
var plans sync.Map // reflect.Type -> *structPlan

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	anyType         = reflect.TypeFor[any]()
	plainMapType    = reflect.TypeFor[map[string]any]()
)

// planOf returns t's plan, or nil when unmarshalFast leaves t to the
// Decoder.
func planOf(t reflect.Type) *structPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*structPlan)
	}
	// A type that holds itself (through a slice or a pointer) finds
	// no plan while its own is made: that field goes through Unmarshal.
	plans.Store(t, (*structPlan)(nil))
	p := makePlan(t)
	plans.Store(t, p)
	return p
}

func makePlan(t reflect.Type) *structPlan {
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	p := &structPlan{byName: map[string]int{}}
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			return nil // embedded fields promote theirs: the Decoder's rules
		}
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",string,") {
			return nil
		}
		if name == "" {
			name = sf.Name
		}
		if !plainName(name) {
			return nil // the Decoder ignores some tags' names
		}
		if _, dup := p.byName[name]; dup {
			return nil // both are ignored by the Decoder
		}
		fp := planField(sf.Type)
		fp.name, fp.index = name, i
		p.byName[name] = len(p.fields)
		p.fields = append(p.fields, fp)
	}
	return p
}

// planField says how a value of type t is read: the unnamed basic
// types, map[string]any and any directly, a struct by its own plan (a
// named struct type that does not decode itself), a slice element by
// element; anything else through Unmarshal.
func planField(t reflect.Type) fieldPlan {
	fp := fieldPlan{kind: kindOf(t)}
	switch fp.kind {
	case fieldInt, fieldFloat:
		fp.bits = t.Bits()
	case fieldOther:
		switch {
		case t.Kind() == reflect.Struct && planOf(t) != nil:
			fp.kind = fieldStruct
		case t.Kind() == reflect.Slice && t.PkgPath() == "" && t.Elem().Kind() != reflect.Uint8:
			// ([]byte is base64 to the Decoder.)
			if e := planField(t.Elem()); e.kind != fieldOther {
				fp.kind, fp.elem = fieldSlice, &e
			}
		case t.Kind() == reflect.Pointer && t.PkgPath() == "":
			if e := planField(t.Elem()); e.kind != fieldOther && e.kind != fieldPtr {
				fp.kind, fp.elem = fieldPtr, &e
			}
		}
	}
	return fp
}

// kindOf says how a value of type t is read when t is one of the unnamed
// basic types, map[string]any or any; fieldOther otherwise.
func kindOf(t reflect.Type) fieldKind {
	if t.PkgPath() != "" {
		return fieldOther // a named type may decode itself, or be json.Number
	}
	switch t.Kind() {
	case reflect.String:
		return fieldString
	case reflect.Bool:
		return fieldBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fieldInt
	case reflect.Float32, reflect.Float64:
		return fieldFloat
	}
	switch t {
	case anyType:
		return fieldAny
	case plainMapType:
		return fieldMap
	}
	return fieldOther
}

func ascii(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// plainName reports whether a field's JSON name is ASCII letters, digits,
// '_', '-' and '.': a name encoding/json takes as it is.
func plainName(s string) bool {
	for i := range len(s) {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (c < '0' || c > '9') && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return s != ""
}
