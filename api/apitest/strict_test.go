package apitest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi/api/apitest"
)

// A document with each way of writing a nullable field, and the ways that
// look nullable but are not under OpenAPI 3.0.3.
const nullables = `
openapi: 3.0.3
info: {title: t, version: '1'}
paths:
  /things/{id}:
    get:
      responses:
        '200':
          description: ok
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Thing'}
        '404':
          $ref: '#/components/responses/NotFound'
components:
  responses:
    NotFound:
      description: none
      content:
        application/problem+json:
          schema: {type: object, required: [code], properties: {code: {type: string}}}
  schemas:
    Time: {type: string, format: date-time}
    Thing:
      type: object
      additionalProperties: false
      properties:
        plain: {type: string}
        nullable: {type: string, nullable: true}
        inlined: {type: string, format: date-time, nullable: true}
        refBeside: {type: string, allOf: [{$ref: '#/components/schemas/Time'}], nullable: true}
        enumWithoutNull: {type: string, enum: [a, b], nullable: true}
        enumWithNull: {type: string, enum: [a, b, null], nullable: true}
        typeless: {nullable: true, enum: [x]}
`

// TestStrictNullable: null passes only where 3.0.3 allows it: beside a
// `type` in the same schema object, and in an enum only when it lists null.
// kin-openapi accepts null in every one of these fields.
func TestStrictNullable(t *testing.T) {
	t.Parallel()
	c, err := apitest.New([]byte(nullables))
	if err != nil {
		t.Fatal(err)
	}
	thing := apitest.SchemaPointer("Thing")
	for _, tt := range []struct {
		body string
		ok   bool
	}{
		{`{"plain":"x"}`, true},
		{`{"plain":null}`, false},
		{`{"nullable":null}`, true},
		{`{"nullable":"x"}`, true},
		{`{"inlined":null}`, true},
		{`{"inlined":"2026-11-30T07:00:00.000Z"}`, true},
		{`{"inlined":"yesterday"}`, false},
		{`{"refBeside":null}`, false},
		{`{"refBeside":"2026-11-30T07:00:00.000Z"}`, true},
		{`{"enumWithoutNull":null}`, false},
		{`{"enumWithoutNull":"a"}`, true},
		{`{"enumWithNull":null}`, true},
		{`{"enumWithNull":"c"}`, false},
		{`{"typeless":null}`, false},
		{`{"unknown":1}`, false},
	} {
		err := c.ValidateJSON(thing, []byte(tt.body))
		if (err == nil) != tt.ok {
			t.Errorf("%s: got error %v, want ok=%v", tt.body, err, tt.ok)
		}
	}
}

// TestResponseSchemaPointer finds an operation's own schema and one behind
// a $ref to components/responses; an answer without a JSON schema in the
// spec is not checked.
func TestResponseSchemaPointer(t *testing.T) {
	t.Parallel()
	c, err := apitest.New([]byte(nullables))
	if err != nil {
		t.Fatal(err)
	}
	json := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	problem := http.Header{"Content-Type": {"application/problem+json"}}
	for _, tt := range []struct {
		status int
		header http.Header
		body   string
		want   string // substring of the error; "" for none
	}{
		{200, json, `{"plain":"x"}`, ""},
		{200, json, `{"plain":null}`, "/plain"},
		{200, json, `not json`, "not JSON"},
		{404, problem, `{"code":"not_found"}`, ""},
		{404, problem, `{"code":null}`, "/code"},
		{404, json, `{"code":null}`, ""},                             // no schema for that media type
		{500, problem, `{"code":null}`, ""},                          // no such response
		{200, http.Header{"Content-Type": {"text/html"}}, `<p>`, ""}, // not JSON
	} {
		err := c.ValidateResponse("/things/{id}", http.MethodGet, tt.status, tt.header, []byte(tt.body))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%d %s %s: %v", tt.status, tt.header.Get("Content-Type"), tt.body, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%d %s %s: got %v, want an error about %s", tt.status, tt.header.Get("Content-Type"), tt.body, err, tt.want)
		}
	}
}

// TestSpecCompiles: every schema of api/openapi.yaml compiles under the
// strict translation (a schema the JSON Schema compiler rejects would
// otherwise surface only when a test first hits it).
func TestSpecCompiles(t *testing.T) {
	t.Parallel()
	c, err := apitest.Strict()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range c.SchemaNames() {
		if err := c.Compile(apitest.SchemaPointer(name)); err != nil {
			t.Error(err)
		}
	}
}
