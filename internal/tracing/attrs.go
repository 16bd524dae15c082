package tracing

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// Field is one attribute of an attribute struct: an exported field of
// type int, []int, float64, bool or string.
type Field struct {
	Name  string
	Type  reflect.Type
	index int
}

var attrTypes = []reflect.Type{
	reflect.TypeFor[int](), reflect.TypeFor[[]int](), reflect.TypeFor[float64](),
	reflect.TypeFor[bool](), reflect.TypeFor[string](),
}

// Fields lists the attributes of struct type t in field order, named by
// their `kiln:"name"` tag or else by the field name in snake case.
func Fields(t reflect.Type) ([]Field, error) {
	if t == nil || t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("attributes must be a struct, not %v", t)
	}
	var out []Field
	seen := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if !slices.Contains(attrTypes, f.Type) {
			return nil, fmt.Errorf("attribute field %s has type %v; use int, []int, float64, bool or string", f.Name, f.Type)
		}
		name := f.Tag.Get("kiln")
		if name == "" {
			name = snakeCase(f.Name)
		}
		if seen[name] {
			return nil, fmt.Errorf("two attribute fields are named %q", name)
		}
		seen[name] = true
		out = append(out, Field{Name: name, Type: f.Type, index: i})
	}
	return out, nil
}

// Attr is one attribute of an attribute struct: Value is an int, []int,
// float64, bool or string.
type Attr struct {
	Name  string
	Value any
}

// StructAttrs returns the attributes of v, an attribute struct, or none
// for nil.
func StructAttrs(v any) ([]Attr, error) {
	if v == nil {
		return nil, nil
	}
	rv := reflect.ValueOf(v)
	fields, err := Fields(rv.Type())
	if err != nil {
		return nil, err
	}
	out := make([]Attr, len(fields))
	for i, f := range fields {
		val := rv.Field(f.index).Interface()
		if ints, ok := val.([]int); ok {
			val = slices.Clone(ints)
		}
		out[i] = Attr{Name: f.Name, Value: val}
	}
	return out, nil
}

// Set sets field f of the struct ptr points to to v, of f's type.
func (f Field) Set(ptr any, v any) {
	reflect.ValueOf(ptr).Elem().Field(f.index).Set(reflect.ValueOf(v))
}

// snakeCase turns a Go field name into an attribute name: "NegativeSlope"
// becomes "negative_slope", "DimA" "dim_a".
func snakeCase(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
