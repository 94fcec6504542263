package handlers

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/leaseapi/leaseapi/api"
)

// FuzzDecodeValidObject holds the one-pass decoder of valid bodies to the
// tokenizing one it replaced: for every valid JSON object, both give the
// same request or the same problem detail, for each request type.
func FuzzDecodeValidObject(f *testing.F) {
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
		if !json.Valid(b) || len(b) == 0 {
			return
		}
		if trimmed := trimSpace(b); len(trimmed) == 0 || trimmed[0] != '{' {
			return
		}
		b = trimSpace(b)
		same(t, b, func() any { return &api.AcquireRequest{} })
		same(t, b, func() any { return &api.HeartbeatRequest{} })
		same(t, b, func() any { return &api.ReleaseRequest{} })
	})
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}

func same(t *testing.T, body []byte, newDst func() any) {
	t.Helper()
	gotDst, wantDst := newDst(), newDst()
	got, want := decodeValidObject(body, gotDst), decodeByTokens(body, wantDst)
	if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
		t.Fatalf("%T from %s:\n one pass: %v\n   tokens: %v", gotDst, body, got, want)
	}
	if got == nil && !reflect.DeepEqual(gotDst, wantDst) {
		t.Fatalf("%T from %s:\n one pass: %+v\n   tokens: %+v", gotDst, body, gotDst, wantDst)
	}
}
