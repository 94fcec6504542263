// Command generate writes the Go client, client.gen.go, from the closed form
// of api/openapi.yaml (package api/internal/closedform) with oapi-codegen
// (pinned in go.mod, run as `go tool oapi-codegen` with oapi-codegen.yaml).
// It runs in api/client: `go generate` there, and TestGeneratedUpToDate.
//
// Why the closed form: oapi-codegen knows no open enum. From an
// `x-extensible-enum` it would make a plain string, and the enum types and
// constants of the client (ProblemCode, ProblemCodeLeaseHeld, ...) would
// vanish; from the `enum` of the closed form it makes them, and since they
// are string types, a value the client does not know still decodes (Valid
// reports false for it). The objects the closed form closes generate as
// they do open: oapi-codegen adds no field for additional properties that
// the spec does not declare.
//
//	go run ./internal/generate -o client.gen.go
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/internal/closedform"
)

func main() {
	out := flag.String("o", "client.gen.go", "the file to write")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	closed, err := closedform.Of(api.Spec)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "leaseapi-client-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	spec := filepath.Join(dir, "openapi.closed.yaml")
	if err := os.WriteFile(spec, closed, 0o600); err != nil {
		return err
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "-o", out, spec)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go tool oapi-codegen: %w", err)
	}
	return nil
}
