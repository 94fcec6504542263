package handlers

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/leaseapi/leaseapi/api"
)

// FuzzValidMembers holds validMembers, decodeJSON's fast path, to its
// reference tokenMembers: for every valid JSON object, both give the same
// members or the same problem detail, for each request type.
func FuzzValidMembers(f *testing.F) {
	for _, body := range []string{
		`{"owner":"a"}`,
		`{"owner":"replica-1","ttlMs":30000,"tick":"2026-11-30T07:00:00Z"}`,
		`{"owner":"a","token":1,"outcome":"failed"}`,
		` { "owner" : "a" , "token" : 7 , "ttlMs" : 1000 } `,
		`{"\u006fwner":"a","token":1}`,
		`{"Owner":"a"}`, `{"owner":"a","owner":"b"}`, `{"owner":null}`, `{"nope":1}`,
		`{"owner":1}`, `{"owner":"a","token":1.5}`, `{"owner":"a","token":1e3}`, `{"token":99999999999999999999}`,
		`{"owner":"a","ttlMs":"5"}`, `{"owner":{"x":[1,{"y":"}"}]},"token":true}`, `{"owner":"a\"b\\c"}`,
		`{"\xff":1}`, `{"owner":"\xff\u2028"}`, `{}`, `{"tick":[],"owner":"a"}`, `{"outcome":"x","owner":"o","token":2}`,
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		b := []byte(body)
		if !json.Valid(b) {
			return
		}
		for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
			b = b[1:]
		}
		if len(b) == 0 || b[0] != '{' {
			return
		}
		for _, dst := range []any{api.AcquireRequest{}, api.HeartbeatRequest{}, api.ReleaseRequest{}} {
			fields := jsonNames(reflect.TypeOf(dst))
			got, gotErr := validMembers(b, fields, nil)
			want, wantErr := tokenMembers(b, fields, nil)
			if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
				t.Fatalf("%T from %s:\n  valid: %v\n tokens: %v", dst, b, gotErr, wantErr)
			}
			if !slices.EqualFunc(got, want, func(g, w member) bool { return g.field == w.field && bytes.Equal(g.value, w.value) }) {
				t.Fatalf("%T from %s:\n  valid: %v\n tokens: %v", dst, b, got, want)
			}
		}
	})
}

// FuzzSetPlain holds setPlain, the shortcut of decodeJSON for plain values,
// to json.Unmarshal: whenever it sets a field of a request type, the field
// gets the value json.Unmarshal gives it, and it leaves every value that
// json.Unmarshal refuses to json.Unmarshal.
func FuzzSetPlain(f *testing.F) {
	for _, value := range []string{
		`"a"`, `"replica-17"`, `""`, `"a\"b"`, `"\u00e9"`, `"é"`, `"\xff"`, `"a b~"`,
		`0`, `-0`, `7`, `-12`, `9223372036854775807`, `9223372036854775808`, `-9223372036854775808`,
		`-9223372036854775809`, `1.5`, `1e3`, `-`, `true`, `null`, `{}`, `[1]`, `"5"`,
	} {
		f.Add(value)
	}
	f.Fuzz(func(t *testing.T, value string) {
		if !json.Valid([]byte(value)) {
			return // setPlain sees valid JSON values only
		}
		for _, dst := range []any{&api.AcquireRequest{}, &api.HeartbeatRequest{}, &api.ReleaseRequest{}} {
			v := reflect.ValueOf(dst).Elem()
			info := structInfoOf(v.Type())
			for i := range v.NumField() {
				got := reflect.New(v.Type()).Elem()
				if !setPlain(got.Field(i), info.kinds[i], []byte(value)) {
					continue
				}
				want := reflect.New(v.Type()).Elem()
				if err := json.Unmarshal([]byte(value), want.Field(i).Addr().Interface()); err != nil {
					t.Fatalf("%s set %s.%s, which json.Unmarshal refuses: %v", value, v.Type(), v.Type().Field(i).Name, err)
				}
				if !reflect.DeepEqual(got.Interface(), want.Interface()) {
					t.Fatalf("%s into %s.%s: got %#v, json.Unmarshal %#v", value, v.Type(), v.Type().Field(i).Name, got.Interface(), want.Interface())
				}
			}
		}
	})
}
