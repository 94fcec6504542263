package closedform_test

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/leaseapi/leaseapi/api/internal/closedform"
)

// open is a document with each kind of schema the closed form must tell
// apart.
const open = `
openapi: 3.0.3
components:
  schemas:
    Answer:
      type: object
      properties:
        type: {type: object, properties: {x: {type: string}}}
        properties: {type: string}
        kind: {type: string, x-extensible-enum: [a, b]}
        state: {type: string, enum: [held, released]}
        maybe: {type: string, nullable: true, x-extensible-enum: [a, null]}
        items: {type: array, items: {type: object, properties: {y: {type: integer}}}}
    Request:
      type: object
      additionalProperties: false
      properties:
        name: {type: string}
    Map:
      type: object
      additionalProperties: {type: string}
      properties:
        fixed: {type: string}
    Free:
      type: object
    Subtype:
      allOf:
        - $ref: '#/components/schemas/Answer'
        - type: object
          properties:
            kind: {type: string, x-extensible-enum: [a]}
`

// TestOf: every object schema with properties and nothing said of others
// is closed, except a member of an allOf; a schema that says what else it
// takes, or declares no properties, is left alone; every x-extensible-enum
// becomes an enum, and an enum stays one.
func TestOf(t *testing.T) {
	t.Parallel()
	out, err := closedform.Of([]byte(open))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("the closed form is not YAML: %v\n%s", err, out)
	}
	schemas := at(t, doc, "components", "schemas")
	for _, tt := range []struct {
		path []string
		want any // additionalProperties; nil: absent
	}{
		{[]string{"Answer"}, false},
		{[]string{"Answer", "properties", "type"}, false},
		{[]string{"Answer", "properties", "items", "items"}, false},
		{[]string{"Request"}, false},
		{[]string{"Map"}, map[string]any{"type": "string"}},
		{[]string{"Free"}, nil},
		{[]string{"Subtype", "allOf", "1"}, nil},
	} {
		got := at(t, schemas, tt.path...)["additionalProperties"]
		if !equal(got, tt.want) {
			t.Errorf("%s: additionalProperties %v, want %v", strings.Join(tt.path, "/"), got, tt.want)
		}
	}
	for _, tt := range []struct {
		path []string
		want []any
	}{
		{[]string{"Answer", "properties", "kind"}, []any{"a", "b"}},
		{[]string{"Answer", "properties", "state"}, []any{"held", "released"}},
		{[]string{"Answer", "properties", "maybe"}, []any{"a", nil}},
		{[]string{"Subtype", "allOf", "1", "properties", "kind"}, []any{"a"}},
	} {
		s := at(t, schemas, tt.path...)
		if got, ok := s["enum"].([]any); !ok || !equal(got, tt.want) {
			t.Errorf("%s: enum %v, want %v", strings.Join(tt.path, "/"), s["enum"], tt.want)
		}
		if _, ok := s["x-extensible-enum"]; ok {
			t.Errorf("%s: x-extensible-enum left in the closed form", strings.Join(tt.path, "/"))
		}
	}
	// A property named "properties" is a field, not the keyword.
	if got := at(t, schemas, "Answer", "properties", "properties"); len(got) != 1 {
		t.Errorf("the field named properties became %v", got)
	}
}

// TestOfRefuses: a document whose extensible enum the closed form cannot
// turn into an enum.
func TestOfRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ schema, want string }{
		{`{type: string, enum: [a], x-extensible-enum: [a, b]}`, "both enum and x-extensible-enum"},
		{`{type: string, x-extensible-enum: a}`, "not a list"},
		{`{type: string, x-extensible-enum: []}`, "not a list"},
		{`{type: integer, x-extensible-enum: [1, 2]}`, "not of type string"},
		{`{x-extensible-enum: [a]}`, "not of type string"},
	} {
		spec := "components: {schemas: {Code: " + tt.schema + "}}"
		_, err := closedform.Of([]byte(spec))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "#/components/schemas/Code") {
			t.Errorf("%s: got %v, want an error at #/components/schemas/Code about %q", tt.schema, err, tt.want)
		}
	}
	if _, err := closedform.Of([]byte("{not yaml")); err == nil {
		t.Error("a document that is not YAML: no error")
	}
}

// at is the mapping at path under m, failing the test when there is none.
func at(t *testing.T, m map[string]any, path ...string) map[string]any {
	t.Helper()
	var v any = m
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			i := int(p[0] - '0')
			if len(p) != 1 || i >= len(c) {
				t.Fatalf("no %s in %v", p, c)
			}
			v = c[i]
		default:
			t.Fatalf("no %s under %v", strings.Join(path, "/"), c)
		}
	}
	out, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: %v is not a mapping", strings.Join(path, "/"), v)
	}
	return out
}

// equal compares YAML values as decoded into any.
func equal(a, b any) bool {
	ya, errA := yaml.Marshal(a)
	yb, errB := yaml.Marshal(b)
	return errA == nil && errB == nil && string(ya) == string(yb)
}
