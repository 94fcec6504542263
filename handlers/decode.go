package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/leaseapi/leaseapi/api"
)

var errTooLarge = &requestError{
	status: http.StatusRequestEntityTooLarge, code: api.CodePayloadTooLarge,
	detail: fmt.Sprintf("the request body is larger than %d bytes; send a smaller JSON object", api.MaxBodyBytes),
}

// decodeBody reads the JSON object of r's body into dst (a pointer to one
// of the api request structs), strictly: Content-Type application/json
// (415), no Content-Encoding (415), at most api.MaxBodyBytes (413), then
// decodeJSON's rules (400).
func decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	if err := checkContentType(r.Header); err != nil {
		return err
	}
	if r.ContentLength > api.MaxBodyBytes {
		return errTooLarge // refused without reading it
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return errTooLarge
		}
		// Not %v: the error (a read timeout at the server's ReadTimeout, a
		// client gone mid-body) names both ends' addresses; the log has it.
		loggerFrom(r.Context()).Info("request body not read", "error", err)
		return invalidf("the request body could not be read completely; send it again")
	}
	return decodeJSON(body, dst)
}

// checkContentType accepts application/json with any parameters (such as
// charset) and no content coding.
func checkContentType(h http.Header) error {
	mediaType, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || mediaType != "application/json" {
		return &requestError{
			status: http.StatusUnsupportedMediaType, code: api.CodeUnsupportedMediaType,
			detail: "send the body as Content-Type: application/json",
		}
	}
	if enc := h.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return &requestError{
			status: http.StatusUnsupportedMediaType, code: api.CodeUnsupportedMediaType,
			detail: "Content-Encoding is not supported; send the body uncompressed",
		}
	}
	return nil
}

// decodeJSON decodes body, which must be exactly one JSON object, into dst.
// Every key must be the exact (case-sensitive) JSON name of a field of dst,
// at most once, with a non-null value of the field's type. encoding/json
// alone would match names case-insensitively and let the last of duplicate
// keys win; both are refused so that every reader of a request, including
// an OpenAPI validator in front of the service, sees the same values.
func decodeJSON(body []byte, dst any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return invalidf("the request body is empty; send a JSON object")
	}
	if trimmed[0] != '{' {
		return invalidf("the request body must be a JSON object")
	}
	if json.Valid(trimmed) {
		return decodeValidObject(trimmed, dst)
	}
	return decodeByTokens(trimmed, dst)
}

// decodeByTokens is decodeJSON for any body that starts with '{'; for
// invalid JSON, checkObject finds the first problem and says where. Valid
// bodies take decodeValidObject, which decides exactly as this does.
func decodeByTokens(trimmed []byte, dst any) error {
	if err := checkObject(trimmed, jsonFields(dst)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields() // checkObject refused them already; a safety net
	if err := dec.Decode(dst); err != nil {
		if e, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return invalidf("field %q must be %s", e.Field, describeType(e.Type))
		}
		return invalidf("the request body is not a valid request: %v", err)
	}
	return nil
}

// decodeValidObject is decodeJSON for a body that is exactly one valid JSON
// object, in one pass and without a tokenizer: it checks every member as
// checkObject does (the same problems, in the same order, with the same
// details), then decodes each value into its field as the whole-object
// decoder would.
func decodeValidObject(body []byte, dst any) error {
	v := reflect.ValueOf(dst).Elem()
	sf := structFieldsOf(v.Type())
	fields := sf.names
	type member struct {
		key   string
		value []byte
	}
	var members [8]member // requests have at most four fields
	found := members[:0]
	i := skipSpace(body, 1) // after '{'
	for body[i] != '}' {
		keyEnd := skipString(body, i)
		key, err := unquoteKey(body[i:keyEnd])
		if err != nil {
			return invalidf("the request body is not valid JSON (%v)", err)
		}
		start := skipSpace(body, skipSpace(body, keyEnd)+1) // after ':'
		end := skipValue(body, start)
		value := body[start:end]
		switch {
		case !slices.Contains(fields, key):
			return invalidf("unknown field %q; the fields are %s", clip(key), strings.Join(fields, ", "))
		case slices.ContainsFunc(found, func(m member) bool { return m.key == key }):
			return invalidf("field %q appears more than once; send each field once", key)
		case string(value) == "null":
			return invalidf("field %q must not be null; omit it to use the default", key)
		}
		found = append(found, member{key, value})
		i = skipSpace(body, end)
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	for _, m := range found {
		field := v.Field(sf.index[m.key]).Addr().Interface()
		if err := json.Unmarshal(m.value, field); err != nil {
			if e, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
				return invalidf("field %q must be %s", m.key, describeType(e.Type))
			}
			return invalidf("the request body is not a valid request: %v", err)
		}
	}
	return nil
}

// The scanners below walk JSON that json.Valid accepted, so they need not
// check syntax: each returns the index just past what it skips.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipString skips the string that starts at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++ // the escaped character; \uXXXX's digits are plain characters
		}
	}
	return i + 1
}

// skipValue skips the value that starts at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // a number, true, false or null
		for i < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[i])) {
			i++
		}
		return i
	}
}

// unquoteKey decodes a member name. A name of plain ASCII without escapes
// is itself; any other goes through encoding/json, which also replaces
// invalid UTF-8 as the tokenizer of checkObject does.
func unquoteKey(quoted []byte) (string, error) {
	if bytes.IndexByte(quoted, '\\') < 0 && !slices.ContainsFunc(quoted, func(c byte) bool { return c >= utf8.RuneSelf }) {
		return string(quoted[1 : len(quoted)-1]), nil
	}
	var key string
	err := json.Unmarshal(quoted, &key)
	return key, err
}

// checkObject walks the top level of one JSON object: syntax, exact known
// keys, no duplicates, no null values, nothing after the object.
func checkObject(body []byte, fields []string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // '{', checked by the caller
		return syntaxError(err)
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntaxError(err)
		}
		key, _ := tok.(string) // a key inside an object is always a string
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return syntaxError(err)
		}
		switch {
		case !slices.Contains(fields, key):
			return invalidf("unknown field %q; the fields are %s", clip(key), strings.Join(fields, ", "))
		case seen[key]:
			return invalidf("field %q appears more than once; send each field once", key)
		case string(value) == "null":
			return invalidf("field %q must not be null; omit it to use the default", key)
		}
		seen[key] = true
	}
	if _, err := dec.Token(); err != nil { // '}'
		return syntaxError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidf("the request body has data after the JSON object; send exactly one object")
	}
	return nil
}

func syntaxError(err error) error {
	if e, ok := errors.AsType[*json.SyntaxError](err); ok {
		return invalidf("the request body is not valid JSON (byte %d: %v)", e.Offset, e)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return invalidf("the request body is truncated JSON; send a complete object")
	}
	return invalidf("the request body is not valid JSON (%v)", err)
}

// jsonFields lists the JSON names of the fields of the struct dst points to.
func jsonFields(dst any) []string {
	return structFieldsOf(reflect.TypeOf(dst).Elem()).names
}

// structFields are the JSON names of a request struct's fields, in order,
// and the index of the field of each name.
type structFields struct {
	names []string
	index map[string]int
}

// structFieldsCache maps a request struct type to its *structFields.
var structFieldsCache sync.Map

func structFieldsOf(t reflect.Type) *structFields {
	if f, ok := structFieldsCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{index: make(map[string]int, t.NumField())}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			f.names = append(f.names, name)
			f.index[name] = i
		}
	}
	structFieldsCache.Store(t, f)
	return f
}

func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int64:
		return "an integer from -9223372036854775808 to 9223372036854775807 written without fraction or exponent"
	case reflect.String:
		return "a string"
	}
	return "a " + t.Kind().String()
}
