package auditchain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// parseFlat reads one flat JSON object of strings and integers — a
// record, a JSONL line or a manifest — strictly: a repeated key, a nested
// value, a float, a boolean, a null or trailing data is an error. A
// lenient reader would let an edited line carry two values for one key,
// one hashed and one shown.
func parseFlat(data []byte) (Fields, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	f := Fields{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
		k, _ := t.(string)
		if _, dup := f[k]; dup {
			return nil, fmt.Errorf("key %q appears twice", k)
		}
		v, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
		switch x := v.(type) {
		case string:
			f[k] = x
		case json.Number:
			n, err := strconv.ParseInt(x.String(), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("field %q is %s, not an integer", k, x)
			}
			f[k] = n
		default:
			return nil, fmt.Errorf("field %q is not a string or an integer", k)
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, errors.New("not a closed JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON object")
	}
	return f, nil
}

// take removes key from f and returns it as a string ("" and false when
// absent or not a string).
func (f Fields) take(key string) (string, bool) {
	v, ok := f[key].(string)
	delete(f, key)
	return v, ok
}

// takeInt removes key from f and returns it as an integer.
func (f Fields) takeInt(key string) (int64, bool) {
	v, ok := f[key].(int64)
	delete(f, key)
	return v, ok
}
