// Command closespec writes the closed form of an OpenAPI document (package
// closedform): what the tests of the Python and Node.js clients check the
// server's answers against. It never ships.
//
//	go run ./api/internal/closespec [-o FILE] [SPEC]
//
// SPEC defaults to the api/openapi.yaml built in (api.Spec), FILE to
// standard output.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/internal/closedform"
)

func main() {
	out := flag.String("o", "", "write the closed form to this file instead of standard output")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: closespec [-o FILE] [SPEC]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "closespec:", err)
		os.Exit(1)
	}
}

func run(out string, args []string) error {
	spec := api.Spec
	switch len(args) {
	case 0:
	case 1:
		b, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		spec = b
	default:
		return fmt.Errorf("one SPEC at most, got %d", len(args))
	}
	closed, err := closedform.Of(spec)
	if err != nil {
		return err
	}
	if out == "" {
		_, err = os.Stdout.Write(closed)
		return err
	}
	return os.WriteFile(out, closed, 0o644)
}
