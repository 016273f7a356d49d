package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"changeflow/internal/domain"
)

// Field errors (docs/api.md, "Field errors"): a 400 for bad input names
// every bad field in data.fields, not only the first, so a form can show
// each problem beside its field and a script learns everything it got
// wrong from one answer.

// fieldErrors collects the problems of one request's inputs. They are
// answered in the order of the body's fields (decodeObject records it),
// whatever order the checks found them in — a wrong type is found while
// decoding, a missing field only after — and problems of inputs outside
// the body (headers) come first. The 400's message is the first
// problem's: the one line clients that show one line have always shown.
type fieldErrors struct {
	problems []fieldProblem
	// order is the body's fields as dotted paths, in declaration order.
	order []string
}

type fieldProblem struct {
	domain.FieldProblem
	message string
}

// add records that field has problem, with the one-line message
// "<field> <problem>.".
func (f *fieldErrors) add(field, problem string) {
	f.addMessage(field, problem, field+" "+problem+".")
}

// addMessage records a problem whose one-line message is worded
// differently from "<field> <problem>.".
func (f *fieldErrors) addMessage(field, problem, message string) {
	f.problems = append(f.problems, fieldProblem{domain.FieldProblem{Field: field, Problem: problem}, message})
}

// has reports whether field already has a problem (a field of the wrong
// type is not checked again for its range).
func (f *fieldErrors) has(field string) bool {
	if f == nil {
		return false
	}
	return slices.ContainsFunc(f.problems, func(p fieldProblem) bool { return p.Field == field })
}

// err is the 400 naming every problem, or nil when there is none.
func (f *fieldErrors) err() error {
	if f == nil || len(f.problems) == 0 {
		return nil
	}
	ps := slices.Clone(f.problems)
	slices.SortStableFunc(ps, func(a, b fieldProblem) int {
		return slices.Index(f.order, a.Field) - slices.Index(f.order, b.Field)
	})
	fields := make([]domain.FieldProblem, 0, len(ps))
	detail := make([]string, 0, len(ps))
	for _, p := range ps {
		fields = append(fields, p.FieldProblem)
		detail = append(detail, p.Field+" "+p.Problem)
	}
	return &domain.Error{Code: domain.CodeInvalidArgument, Message: ps[0].message,
		Detail: "bad input: " + strings.Join(detail, "; "), Fields: fields}
}

// invalidField is a 400 naming one field.
func invalidField(field, problem string) error {
	var f fieldErrors
	f.add(field, problem)
	return f.err()
}

// fieldProblemView is one entry of data.fields.
type fieldProblemView struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// invalidData is the data of every 400: fields is never null, so a
// client can always iterate it.
type invalidData struct {
	Fields []fieldProblemView `json:"fields"`
}

func invalidDataOf(ps []domain.FieldProblem) invalidData {
	out := invalidData{Fields: make([]fieldProblemView, 0, len(ps))}
	for _, p := range ps {
		out.Fields = append(out.Fields, fieldProblemView(p))
	}
	return out
}

// decodeObject decodes a body that must be one JSON object into the
// struct v points to, member by member, and records every member of the
// wrong type in f — encoding/json alone stops at the earliest such
// member. Members match fields by their json tag as encoding/json matches
// them (exactly, else case-insensitively; of several case-insensitive
// matches the first in byte order, where encoding/json would take the
// last in the body — only a body naming one field twice in different
// cases can tell); unknown members are ignored and JSON null leaves a
// field as it is. Nested structs are decoded the same way, their members
// named by a dotted path ("ext.mrId"). The error is for a body that is
// unusable as a whole: not JSON, not one value, not an object.
func decodeObject(raw []byte, v any, f *fieldErrors) error {
	f.order = fieldOrder(reflect.TypeOf(v).Elem(), "")
	var members map[string]json.RawMessage
	if err := decodeJSON(raw, &members); err != nil {
		return err
	}
	decodeMembers(members, reflect.ValueOf(v).Elem(), "", f)
	return nil
}

// fieldOrder lists the json paths of struct type t in declaration order.
func fieldOrder(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" || !sf.IsExported() {
			continue
		}
		out = append(out, prefix+name)
		if sf.Type.Kind() == reflect.Struct {
			out = append(out, fieldOrder(sf.Type, prefix+name+".")...)
		}
	}
	return out
}

func decodeMembers(members map[string]json.RawMessage, rv reflect.Value, prefix string, f *fieldErrors) {
	rt := rv.Type()
	for i := range rt.NumField() {
		sf := rt.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" || !sf.IsExported() {
			continue
		}
		raw, ok := member(members, name)
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		fv := rv.Field(i)
		if sf.Type.Kind() == reflect.Struct {
			var sub map[string]json.RawMessage
			if err := json.Unmarshal(raw, &sub); err != nil {
				f.add(prefix+name, "must be an object")
				continue
			}
			decodeMembers(sub, fv, prefix+name+".", f)
			continue
		}
		if err := json.Unmarshal(raw, fv.Addr().Interface()); err != nil {
			f.add(prefix+name, "must be "+kindInWords(sf.Type))
		}
	}
}

// member finds the member for a field name: exact, else the first
// case-insensitive match in byte order (deterministic).
func member(members map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	if raw, ok := members[name]; ok {
		return raw, true
	}
	var keys []string
	for k := range members {
		if strings.EqualFold(k, name) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, false
	}
	slices.Sort(keys)
	return members[keys[0]], true
}

// kindInWords says what a field of type t takes, for "must be …".
func kindInWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "of another type"
}
