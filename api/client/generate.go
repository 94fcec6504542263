package client

// The client is generated from the contract the server implements, never
// written by hand; api/openapi.yaml is the single source.
//
//go:generate go tool oapi-codegen -config oapi-codegen.yaml -o client.gen.go ../openapi.yaml
