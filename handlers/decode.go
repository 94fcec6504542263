package handlers

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

func tooLarge(limit int64) error {
	return &requestError{
		status: http.StatusRequestEntityTooLarge, code: api.CodePayloadTooLarge,
		detail: fmt.Sprintf("the request body is larger than %d bytes; send a smaller JSON object", limit),
	}
}

// decodeBody reads the JSON object of r's body into dst (a pointer to one
// of the api request structs), strictly: Content-Type application/json
// (415), no Content-Encoding (415), at most api.MaxBodyBytes (413), then
// decodeJSON's rules (400).
func decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	return decodeBodyUpTo(w, r, dst, api.MaxBodyBytes)
}

// decodeBodyUpTo is decodeBody with a body of at most limit bytes.
func decodeBodyUpTo(w http.ResponseWriter, r *http.Request, dst any, limit int64) error {
	if err := checkContentType(r.Header); err != nil {
		return err
	}
	if r.ContentLength > limit {
		return tooLarge(limit) // refused without reading it
	}
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer bodyBuffers.Put(buf)
	buf.Reset()
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return tooLarge(limit)
		}
		// Not %v: the error (a read timeout at the server's ReadTimeout, a
		// client gone mid-body) names both ends' addresses; the log has it.
		loggerFrom(r.Context()).Info("request body not read", "error", err)
		return invalidf("the request body could not be read completely; send it again")
	}
	return decodeJSON(buf.Bytes(), dst) // which copies what it keeps
}

// bodyBuffers hold request bodies while they are decoded. A buffer grows
// to at most api.MaxOwedBodyBytes plus bytes.MinRead.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// checkContentType accepts application/json with any parameters (such as
// charset) and no content coding.
func checkContentType(h http.Header) error {
	if !isJSON(h.Get("Content-Type")) {
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

// isJSON reports whether the media type of contentType is application/json.
func isJSON(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == "application/json"
}

// decodeJSON decodes body, which must be exactly one JSON object, into dst,
// a pointer to a struct whose fields all have JSON names. encoding/json
// alone would match names case-insensitively and let the last of duplicate
// keys win; both are refused so that every reader of a request, including
// an OpenAPI validator in front of the service, sees the same values.
//
// The rules, checked in this order; the first one broken is the answer:
//  1. the body is not empty and is a JSON object;
//  2. member by member, in the body's order: the JSON is valid up to the
//     end of the member, and addMember's rules hold (an exact,
//     case-sensitive field name, given once, not null);
//  3. nothing but white space follows the object;
//  4. member by member, each value has its field's type.
func decodeJSON(body []byte, dst any) error {
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 {
		return invalidf("the request body is empty; send a JSON object")
	}
	if body[0] != '{' {
		return invalidf("the request body must be a JSON object")
	}
	v := reflect.ValueOf(dst).Elem()
	info := structInfoOf(v.Type())
	fields := info.names
	var buf [8]member // requests have at most four fields
	var members []member
	var err error
	if json.Valid(body) {
		// The members or the problem of tokenMembers (FuzzValidMembers holds
		// them equal) without the tokenizer's cost, which is most of a
		// valid request's decoding.
		members, err = validMembers(body, fields, buf[:0])
	} else {
		members, err = tokenMembers(body, fields, buf[:0])
	}
	if err != nil {
		return err
	}
	for _, m := range members {
		if info.kinds[m.field] == objectArray {
			if err := decodeObjects(m.value, v.Field(m.field), fields[m.field]); err != nil {
				return err
			}
			continue
		}
		if setPlain(v.Field(m.field), info.kinds[m.field], m.value) {
			continue
		}
		if err := json.Unmarshal(m.value, v.Field(m.field).Addr().Interface()); err != nil {
			if e, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
				return invalidf("field %q must be %s", fields[m.field], describeType(e.Type))
			}
			return invalidf("the request body is not a valid request: %v", err)
		}
	}
	return nil
}

// member is one member of the request's object: the index of its field
// and its value.
type member struct {
	field int
	value []byte
}

// addMember appends the member key: value to members if key is the exact
// name of one of fields, not already in members, and value is not null.
func addMember(members []member, fields []string, key string, value []byte) ([]member, error) {
	field := slices.Index(fields, key)
	switch {
	case field < 0:
		return nil, invalidf("unknown field %q; the fields are %s", clip(key), strings.Join(fields, ", "))
	case slices.ContainsFunc(members, func(m member) bool { return m.field == field }):
		return nil, invalidf("field %q appears more than once; send each field once", key)
	case string(value) == "null":
		return nil, invalidf("field %q must not be null; omit it to use the default", key)
	}
	return append(members, member{field, value}), nil
}

// tokenMembers checks rules 2 and 3 of decodeJSON on any body that starts
// with '{' and returns its members. It is the reference: for invalid JSON
// its problem says what is wrong and where.
func tokenMembers(body []byte, fields []string, members []member) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	_, _ = dec.Token() // '{', checked by the caller
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(err)
		}
		key, _ := tok.(string) // a key inside an object is always a string
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, syntaxError(err)
		}
		if members, err = addMember(members, fields, key, value); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, syntaxError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalidf("the request body has data after the JSON object; send exactly one object")
	}
	return members, nil
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

// validMembers is tokenMembers for a body that is exactly one valid JSON
// object (json.Valid), found by skipping over it: the syntax of rule 2 and
// rule 3 hold already, so only addMember's rules are left to check.
func validMembers(body []byte, fields []string, members []member) ([]member, error) {
	i := skipSpace(body, 1) // after '{'
	for body[i] != '}' {
		keyEnd := skipString(body, i)
		start := skipSpace(body, skipSpace(body, keyEnd)+1) // after ':'
		end := skipValue(body, start)
		var err error
		if members, err = addMember(members, fields, unquoteKey(body[i:keyEnd], fields), body[start:end]); err != nil {
			return nil, err
		}
		i = skipSpace(body, end)
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	return members, nil
}

// The scanners of validMembers walk valid JSON, so they need not check
// syntax: each returns the index just past what it skips.

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

// unquoteKey decodes a valid JSON string. One of plain ASCII without
// escapes is its content (one of fields itself when it names one, which
// saves copying it); any other goes through encoding/json, which replaces
// invalid UTF-8 as the tokenizer does.
func unquoteKey(quoted []byte, fields []string) string {
	if bytes.IndexByte(quoted, '\\') < 0 && !slices.ContainsFunc(quoted, func(c byte) bool { return c >= utf8.RuneSelf }) {
		content := quoted[1 : len(quoted)-1]
		for _, f := range fields {
			if f == string(content) {
				return f
			}
		}
		return string(content)
	}
	var key string
	_ = json.Unmarshal(quoted, &key) // cannot fail: json.Valid accepted the string
	return key
}

// jsonNames lists the JSON names of the fields of struct type t, in field
// order.
func jsonNames(t reflect.Type) []string {
	names := make([]string, t.NumField())
	for i := range names {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return names
}

// structInfo is what decodeJSON needs of a request type, found once.
type structInfo struct {
	names []string    // jsonNames
	kinds []plainKind // by field
}

// plainKind is the kind of a field that setPlain can set, or plainNone.
type plainKind int

const (
	plainNone   plainKind = iota
	plainString           // a string kind, or a pointer to one
	plainInt64            // an int64 kind, or a pointer to one
	objectArray           // a slice of structs: decodeObjects
)

// maxObjects bounds the objects of an array in a request (the items of a
// batch), so that no body makes more of them.
const maxObjects = leaseapi.MaxBatchItems

// decodeObjects sets field, a slice of structs, to the JSON array value
// of objects, each decoded by decodeJSON's rules; a problem names the
// object by its index in the array name. It refuses more than maxObjects
// before decoding them.
func decodeObjects(value []byte, field reflect.Value, name string) error {
	notArray := invalidf("field %q must be an array of objects", name)
	dec := json.NewDecoder(bytes.NewReader(value))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return notArray
	}
	var raws []json.RawMessage
	for dec.More() {
		if len(raws) == maxObjects {
			return invalidf("field %q holds more than %d objects; send at most %d", name, maxObjects, maxObjects)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return notArray
		}
		raws = append(raws, raw)
	}
	objects := reflect.MakeSlice(field.Type(), len(raws), len(raws))
	for i, raw := range raws {
		if err := decodeJSON(raw, objects.Index(i).Addr().Interface()); err != nil {
			if re, ok := errors.AsType[*requestError](err); ok {
				return invalidf("%s[%d]: %s", name, i, re.detail)
			}
			return err
		}
	}
	field.Set(objects)
	return nil
}

var structInfos sync.Map // reflect.Type → *structInfo

func structInfoOf(t reflect.Type) *structInfo {
	if info, ok := structInfos.Load(t); ok {
		return info.(*structInfo)
	}
	info := &structInfo{names: jsonNames(t), kinds: make([]plainKind, t.NumField())}
	for i := range info.kinds {
		ft := t.Field(i).Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if reflect.PointerTo(ft).Implements(jsonUnmarshaler) || reflect.PointerTo(ft).Implements(textUnmarshaler) {
			continue // decoded its own way
		}
		switch ft.Kind() {
		case reflect.Slice:
			if ft.Elem().Kind() == reflect.Struct {
				info.kinds[i] = objectArray
			}
		case reflect.String:
			info.kinds[i] = plainString
		case reflect.Int64:
			info.kinds[i] = plainInt64
		}
	}
	actual, _ := structInfos.LoadOrStore(t, info)
	return actual.(*structInfo)
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// setPlain sets field, of kind k, to value, a valid JSON value, and
// reports true when value is a plain string (printable ASCII without
// escapes) into a string field or a plain integer into an int64 field: the
// values of nearly every request, set as json.Unmarshal would set them
// without the cost of its decoder. Any other value is left to
// json.Unmarshal, which also makes its errors.
func setPlain(field reflect.Value, k plainKind, value []byte) bool {
	switch k {
	case plainString:
		if len(value) < 2 || value[0] != '"' || slices.ContainsFunc(value[1:len(value)-1], func(c byte) bool {
			return c == '\\' || c == '"' || c < 0x20 || c >= utf8.RuneSelf
		}) {
			return false
		}
		settable(field).SetString(string(value[1 : len(value)-1]))
	case plainInt64:
		digits := value
		if len(digits) > 0 && digits[0] == '-' {
			digits = digits[1:]
		}
		if len(digits) == 0 || slices.ContainsFunc(digits, func(c byte) bool { return c < '0' || c > '9' }) {
			return false
		}
		n, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil {
			return false // out of range: json.Unmarshal names the problem
		}
		settable(field).SetInt(n)
	default:
		return false
	}
	return true
}

// settable is field, or for a pointer field a new value it points to.
func settable(field reflect.Value) reflect.Value {
	if field.Kind() != reflect.Pointer {
		return field
	}
	field.Set(reflect.New(field.Type().Elem()))
	return field.Elem()
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
	case reflect.Float64:
		return "a number"
	}
	return "a " + t.Kind().String()
}
