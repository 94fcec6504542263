package client

// The client is generated from the contract the server implements, never
// written by hand; api/openapi.yaml is the single source, read in its
// closed form so that its extensible enums keep their Go types and
// constants (see internal/generate).
//
//go:generate go run ./internal/generate -o client.gen.go
