// Package apitest checks JSON documents against api/openapi.yaml the way a
// strict client author's validator reads an OpenAPI 3.0.3 document, for the
// tests of api and handlers. It never ships: only tests import it.
//
// kin-openapi, which the handler tests also use for routes, status codes and
// headers, accepts null wherever `nullable: true` appears, even beside an
// `allOf` whose referenced schema does not allow null, and even for an `enum`
// that does not list null. OpenAPI 3.0.3 says otherwise: `nullable: true`
// adds "null" to the `type` of its own schema object only, and every other
// keyword (an `allOf` member, an `enum`) keeps its meaning. A client that
// validates answers, or a generator that trusts the document, follows 3.0.3;
// so does this package, so that the server's answers and the spec cannot
// drift apart unnoticed.
//
// The tests read the closed form of the spec (ClosedSpec, package
// api/internal/closedform): the published document leaves answers open to
// what later releases add (new fields, new codes), while the server's own
// answers must be exactly this release's.
package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/internal/closedform"
)

// specURL names the translated document for the JSON Schema compiler; it is
// never fetched.
const specURL = "https://leaseapi.invalid/openapi.json"

// Contract is an OpenAPI document with every schema translated to JSON Schema
// draft 4 (which the Schema Object of OpenAPI 3.0 extends) under the strict
// reading of `nullable`. It is safe for concurrent use.
type Contract struct {
	doc map[string]any

	mu       sync.Mutex
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

// ClosedSpec is the closed form of api.Spec (YAML): every response object
// closed, every x-extensible-enum an enum. The tests that load the spec
// into another validator (kin-openapi) load this. It is derived once per
// process.
var ClosedSpec = sync.OnceValues(func() ([]byte, error) { return closedform.Of(api.Spec) })

// Strict returns the contract of the closed form of api.Spec, translated
// once per process.
var Strict = sync.OnceValues(func() (*Contract, error) {
	closed, err := ClosedSpec()
	if err != nil {
		return nil, err
	}
	return New(closed)
})

// New translates an OpenAPI 3.0 document (YAML or JSON).
func New(spec []byte) (*Contract, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	strictNullable(doc)
	// Through JSON, so that numbers and maps have the types the compiler
	// expects.
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("spec as JSON: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("spec as JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.AssertFormat()
	if err := c.AddResource(specURL, v); err != nil {
		return nil, fmt.Errorf("add spec: %w", err)
	}
	return &Contract{doc: v.(map[string]any), compiler: c, compiled: map[string]*jsonschema.Schema{}}, nil
}

// strictNullable rewrites every schema object of v in place: `nullable: true`
// with a `type` beside it adds "null" to that type, as OpenAPI 3.0.3 defines
// it; `nullable` without a `type` means nothing and is dropped. Only a
// boolean `nullable` is the keyword (a property named "nullable" is a map).
func strictNullable(v any) {
	switch v := v.(type) {
	case map[string]any:
		if nullable, ok := v["nullable"].(bool); ok {
			delete(v, "nullable")
			if t, ok := v["type"].(string); ok && nullable {
				v["type"] = []any{t, "null"}
			}
		}
		for _, child := range v {
			strictNullable(child)
		}
	case []any:
		for _, child := range v {
			strictNullable(child)
		}
	}
}

// SchemaPointer is the JSON pointer of components/schemas/name.
func SchemaPointer(name string) string { return "/components/schemas/" + escape(name) }

// ResponseSchemaPointer is the JSON pointer of the schema of the answer to
// method on the spec's path template with status and media type (without
// parameters), following a $ref to components/responses. ok is false when
// the spec has no schema for that answer (no such response, or one without
// a body of that media type).
func (c *Contract) ResponseSchemaPointer(pathTemplate, method string, status int, mediaType string) (pointer string, ok bool) {
	ptr := "/paths/" + escape(pathTemplate) + "/" + strings.ToLower(method) + "/responses/" + strconv.Itoa(status)
	resp, ok := c.at(ptr).(map[string]any)
	if !ok {
		return "", false
	}
	if ref, isRef := resp["$ref"].(string); isRef {
		ptr = strings.TrimPrefix(ref, "#")
	}
	ptr += "/content/" + escape(mediaType) + "/schema"
	if _, ok := c.at(ptr).(map[string]any); !ok {
		return "", false
	}
	return ptr, true
}

// ValidateJSON checks the JSON document body against the schema at pointer.
func (c *Contract) ValidateJSON(pointer string, body []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return c.Validate(pointer, v)
}

// Validate checks v (as decoded by encoding/json, or by
// jsonschema.UnmarshalJSON) against the schema at pointer.
func (c *Contract) Validate(pointer string, v any) error {
	sch, err := c.schema(pointer)
	if err != nil {
		return err
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("strict OpenAPI 3.0.3 validation against #%s: %w", pointer, err)
	}
	return nil
}

// ValidateResponse checks an answer's body against the schema the spec gives
// for it; a response without a JSON body in the spec is not checked here.
func (c *Contract) ValidateResponse(pathTemplate, method string, status int, header http.Header, body []byte) error {
	mediaType, _, _ := strings.Cut(header.Get("Content-Type"), ";")
	if !strings.HasSuffix(mediaType, "json") {
		return nil
	}
	pointer, ok := c.ResponseSchemaPointer(pathTemplate, method, status, strings.TrimSpace(mediaType))
	if !ok {
		return nil
	}
	return c.ValidateJSON(pointer, body)
}

// SchemaNames are the names of components/schemas, sorted.
func (c *Contract) SchemaNames() []string {
	schemas, _ := c.at("/components/schemas").(map[string]any)
	return slices.Sorted(maps.Keys(schemas))
}

// Compile compiles the schema at pointer, so that a schema the strict
// reading cannot use fails a test of its own.
func (c *Contract) Compile(pointer string) error {
	_, err := c.schema(pointer)
	return err
}

func (c *Contract) schema(pointer string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sch, ok := c.compiled[pointer]; ok {
		return sch, nil
	}
	sch, err := c.compiler.Compile(specURL + "#" + pointer)
	if err != nil {
		return nil, fmt.Errorf("compile #%s: %w", pointer, err)
	}
	c.compiled[pointer] = sch
	return sch, nil
}

// at is the value at a JSON pointer of the translated document, nil if none.
func (c *Contract) at(pointer string) any {
	var v any = c.doc
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
	}
	return v
}

// escape makes s one JSON pointer token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
