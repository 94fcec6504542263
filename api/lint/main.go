// Command lint checks api/openapi.yaml with the OpenAPI linter of
// github.com/speakeasy-api/openapi and the rules of lint.yaml, and exits 1
// when it finds an error. `make lint` runs it; it is a module of its own so
// that the linter is no dependency of leaseapi.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/speakeasy-api/openapi/linter"
	"github.com/speakeasy-api/openapi/openapi"
	openapilinter "github.com/speakeasy-api/openapi/openapi/linter"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: lint CONFIG SPEC")
		os.Exit(2)
	}
	if err := run(context.Background(), os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "lint:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, configPath, specPath string) error {
	cfg, err := linter.LoadConfigFromFile(configPath)
	if err != nil {
		return err
	}
	f, err := os.Open(specPath)
	if err != nil {
		return err
	}
	defer f.Close()
	doc, invalid, err := openapi.Unmarshal(ctx, f)
	if err != nil {
		return fmt.Errorf("read %s: %w", specPath, err)
	}
	l, err := openapilinter.NewLinter(cfg)
	if err != nil {
		return err
	}
	out, err := l.Lint(ctx, linter.NewDocumentInfo(doc, specPath), invalid, nil)
	if err != nil {
		return err
	}
	fmt.Print(out.FormatText())
	if out.HasErrors() {
		return fmt.Errorf("%s: %d errors", specPath, out.ErrorCount())
	}
	return nil
}
