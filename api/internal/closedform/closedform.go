// Package closedform derives the closed form of an OpenAPI 3.0 document:
// the form the server's own tests validate answers against, and the one the
// Go client is generated from. It never ships.
//
// The published api/openapi.yaml leaves its answers open to what later
// releases may add (docs/upgrading.md): response objects declare no
// `additionalProperties: false`, and the strings that may gain values list
// them under `x-extensible-enum` (the convention of Zalando's API
// guidelines) instead of `enum`. The closed form says that this release
// sends nothing else: every object schema that declares properties and
// says nothing of others gets `additionalProperties: false`, and every
// `x-extensible-enum` becomes the `enum` it lists. An object that is a
// member of an `allOf`, `anyOf` or `oneOf` is left as it is: closed, it would
// refuse the properties its siblings declare.
package closedform

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// extensibleEnum is the keyword of an open list of values.
const extensibleEnum = "x-extensible-enum"

// Of returns the closed form of the OpenAPI document spec (YAML or JSON),
// as YAML with the document's order and comments.
func Of(spec []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	if err := closeNode(&doc, "", false); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("write closed spec: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("write closed spec: %w", err)
	}
	return out.Bytes(), nil
}

// closeNode closes n and everything under it in place; path is n's JSON
// pointer, for errors, and composed says whether n is a member of an
// allOf, anyOf or oneOf.
func closeNode(n *yaml.Node, path string, composed bool) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := closeNode(c, path, false); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := closeNode(c, fmt.Sprintf("%s/%d", path, i), composed); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		if err := closeMapping(n, path, composed); err != nil {
			return err
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			composition := key == "allOf" || key == "anyOf" || key == "oneOf"
			if err := closeNode(n.Content[i+1], path+"/"+escape(key), composition); err != nil {
				return err
			}
		}
	}
	return nil
}

// closeMapping closes the mapping n itself, when it is a schema: an
// object schema with properties and without additionalProperties gets
// additionalProperties false (unless composed), an x-extensible-enum
// becomes an enum.
func closeMapping(n *yaml.Node, path string, composed bool) error {
	if v := value(n, extensibleEnum); v != nil {
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			return fmt.Errorf("#%s: %s is not a list of values", path, extensibleEnum)
		}
		if value(n, "enum") != nil {
			return fmt.Errorf("#%s: both enum and %s", path, extensibleEnum)
		}
		if t := value(n, "type"); t == nil || t.Value != "string" {
			return fmt.Errorf("#%s: %s on a schema that is not of type string", path, extensibleEnum)
		}
		key(n, extensibleEnum).Value = "enum"
	}
	// "type: object" tells a schema from a map of properties, whose values
	// are schemas, never the string "object".
	if t := value(n, "type"); t == nil || t.Kind != yaml.ScalarNode || t.Value != "object" {
		return nil
	}
	if props := value(n, "properties"); composed || props == nil || props.Kind != yaml.MappingNode || value(n, "additionalProperties") != nil {
		return nil
	}
	n.Content = append(n.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "additionalProperties"},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "false"})
	return nil
}

// key is the key node of name in the mapping n, nil if none.
func key(n *yaml.Node, name string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return n.Content[i]
		}
	}
	return nil
}

// value is the value node of name in the mapping n, nil if none.
func value(n *yaml.Node, name string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return n.Content[i+1]
		}
	}
	return nil
}

// escape makes s one JSON pointer token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
