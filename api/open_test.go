package api_test

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/leaseapi/leaseapi/api"
)

// closedInAnswers are the enums of the schemas the server sends that stay
// closed sets (`enum`, not `x-extensible-enum`), by JSON pointer under
// components/schemas; docs/upgrading.md says why each is closed. Every
// other enum an answer carries may grow, and the published spec lists it
// under x-extensible-enum.
var closedInAnswers = []string{
	"BatchResult/properties/status",
	"Health/properties/status",
	"JobPolicy/properties/status",
	"Lease/properties/lastOutcome",
	"Role",
	"Run/properties/outcome",
	"State",
	"Status/properties/status",
}

// TestSpecOpenToAdditions holds the published spec to the compatibility
// policy (docs/upgrading.md): the objects only the server sends (answers,
// webhook bodies) do not refuse fields a later release adds, the objects a
// request sends do (the server refuses unknown fields); every problem code
// is an extensible enum, and so is every other enum of an answer but the
// closed sets of closedInAnswers; no answer is a oneOf, whose members an
// open code would no longer keep apart.
func TestSpecOpenToAdditions(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := yaml.Unmarshal(api.Spec, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)

	// The schemas requests send, and those the server sends: its answers
	// and the bodies of its webhooks (callbacks' request bodies).
	sent, answered := map[string]bool{}, map[string]bool{}
	for _, item := range doc["paths"].(map[string]any) {
		for _, op := range item.(map[string]any) {
			op, ok := op.(map[string]any)
			if !ok {
				continue
			}
			reach(doc, op["requestBody"], sent)
			reach(doc, op["responses"], answered)
			reach(doc, op["callbacks"], answered)
		}
	}
	reach(doc, doc["components"].(map[string]any)["responses"], answered)

	var closedEnums []string
	for _, name := range slices.Sorted(maps.Keys(schemas)) {
		schema := schemas[name].(map[string]any)
		if schema["type"] == "object" && schema["properties"] != nil {
			switch {
			case sent[name] && schema["additionalProperties"] != false:
				t.Errorf("%s: a request object without additionalProperties: false (the server refuses unknown fields)", name)
			case !sent[name]:
				walk(schema, name, func(path string, s map[string]any) {
					if s["additionalProperties"] == false {
						t.Errorf("%s: additionalProperties: false in an object only the server sends (a later release may add fields)", path)
					}
				})
			}
		}
		walk(schema, name, func(path string, s map[string]any) {
			_, open := s["x-extensible-enum"]
			_, closed := s["enum"]
			switch {
			case strings.HasSuffix(path, "/properties/code") && (closed || !open):
				t.Errorf("%s: a problem code that is not an x-extensible-enum", path)
			case closed && answered[name] && !strings.HasSuffix(path, "Problem/allOf/1/properties/status"):
				// A problem subtype's status is the HTTP status of its
				// answer, closed by definition.
				closedEnums = append(closedEnums, path)
			}
		})
	}
	if want := slices.Sorted(slices.Values(closedInAnswers)); !slices.Equal(closedEnums, want) {
		t.Errorf("the closed enums of answers are %v, want %v: an enum an answer carries is an x-extensible-enum "+
			"unless it is a closed set by contract (then add it to closedInAnswers and say why in docs/upgrading.md)", closedEnums, want)
	}
	for _, response := range doc["components"].(map[string]any)["responses"].(map[string]any) {
		walk(response.(map[string]any), "", func(path string, s map[string]any) {
			if _, ok := s["oneOf"]; ok {
				t.Errorf("components/responses/%s: a oneOf (use anyOf: with open codes the members may overlap)", path)
			}
		})
	}
}

// reach adds to names every component schema that v refers to, and those
// they refer to.
func reach(doc map[string]any, v any, names map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			target := doc
			parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
			for _, p := range parts[:len(parts)-1] {
				target = target[p].(map[string]any)
			}
			name := parts[len(parts)-1]
			if parts[len(parts)-2] == "schemas" {
				if names[name] {
					return
				}
				names[name] = true
			}
			reach(doc, target[name], names)
			return
		}
		for _, c := range v {
			reach(doc, c, names)
		}
	case []any:
		for _, c := range v {
			reach(doc, c, names)
		}
	}
}

// walk calls fn with every mapping under v (v included) and its path.
func walk(v map[string]any, path string, fn func(path string, s map[string]any)) {
	fn(path, v)
	for _, k := range slices.Sorted(maps.Keys(v)) {
		switch c := v[k].(type) {
		case map[string]any:
			walk(c, path+"/"+k, fn)
		case []any:
			for i, e := range c {
				if m, ok := e.(map[string]any); ok {
					walk(m, path+"/"+k+"/"+strconv.Itoa(i), fn)
				}
			}
		}
	}
}
