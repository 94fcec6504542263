package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// The generated client decodes times into time.Time, which reads RFC 3339
// in years 0000-9999 only: one lease with a time of year 10000, or text that
// is not a time, fails the decoding of a whole list. leasectl decodes each
// lease and run by itself, and a time it cannot read fails only that field:
// decodeTolerant keeps its text, and the tables print it as sent, marked
// unreadable. (The generated client is left as generated; the tolerance is
// here, in the layer users call.)

// unreadable maps the JSON name of each time field that could not be read
// to its text as sent.
type unreadable map[string]string

// decodeTolerant decodes raw, one JSON object, into dst, a pointer to a
// generated struct. A time field that does not decode is left zero (nil for
// a pointer) and returned in unreadable with its text.
func decodeTolerant(raw []byte, dst any) (unreadable, error) {
	err := json.Unmarshal(raw, dst)
	if err == nil {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil, err
	}
	bad := unreadable{}
	for _, name := range timeFields(reflect.TypeOf(dst).Elem()) {
		value, ok := fields[name]
		if !ok || string(value) == "null" {
			continue
		}
		var t time.Time
		if json.Unmarshal(value, &t) == nil {
			continue
		}
		var text string
		if json.Unmarshal(value, &text) != nil {
			text = string(value)
		}
		bad[name] = text
		fields[name] = json.RawMessage("null")
	}
	if len(bad) == 0 {
		return nil, err // not a time: the answer is wrong otherwise
	}
	fixed, merr := json.Marshal(fields)
	if merr != nil {
		return nil, merr
	}
	if err := json.Unmarshal(fixed, dst); err != nil {
		return nil, err
	}
	return bad, nil
}

// timeFields are the JSON names of the time.Time and *time.Time fields of
// struct type t.
func timeFields(t reflect.Type) []string {
	timeType := reflect.TypeFor[time.Time]()
	var names []string
	for f := range t.Fields() {
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft != timeType {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

// at prints the time field name: its text marked unreadable when it could
// not be read, else t as when prints it ("-" when nil).
func (u unreadable) at(name string, t *time.Time, now time.Time) string {
	if text, ok := u[name]; ok {
		return fmt.Sprintf("%s (unreadable: not a time leasectl can represent)", text)
	}
	return timeOrNone(t, now)
}
