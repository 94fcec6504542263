package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/leaseapi/leaseapi"
)

// scopeFlags collects the repeated --scope.
type scopeFlags []string

func (s *scopeFlags) String() string     { return strings.Join(*s, ",") }
func (s *scopeFlags) Set(v string) error { *s = append(*s, v); return nil }

// credentials runs `leaseapi credentials create|list|revoke` on the
// database directly: the bootstrap of the first credential, and the way
// back in for an operator who lost every admin token. On the embedded
// store it needs leaseapi stopped, since one process holds the file.
func credentials(ctx context.Context, cfg Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("credentials needs create, list or revoke (see leaseapi -h)")
	}
	run, err := credentialCommand(args[0], args[1:])
	if err != nil {
		return err
	}
	s, err := openStore(ctx, cfg, logger, nil)
	if err != nil {
		return err
	}
	err = run(ctx, s, stdout)
	return errors.Join(err, s.Close())
}

// credentialCommand parses one subcommand before the store is opened, so
// that a usage error touches nothing.
func credentialCommand(name string, args []string) (func(context.Context, leaseapi.CredentialStore, io.Writer) error, error) {
	fs := flag.NewFlagSet("leaseapi credentials "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	switch name {
	case "create":
		credName := fs.String("name", "", "unique name")
		role := fs.String("role", "", "read, lease or admin")
		var scopes scopeFlags
		fs.Var(&scopes, "scope", "job id prefix ending in : or ., or *; repeatable")
		rate := fs.Float64("rate", -1, "acquires and reads per second per instance; 0 none; default LEASEAPI_RATE_LIMIT")
		if err := parseFlags(fs, args, 0); err != nil {
			return nil, err
		}
		var ratePtr *float64
		if *rate >= 0 {
			ratePtr = rate
		}
		c, token := leaseapi.NewCredential(*credName, leaseapi.Role(*role), scopes, ratePtr)
		c.Scopes = scopes
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("credentials create: %w", err)
		}
		c.Scopes = leaseapi.NormalizeScopes(scopes)
		return func(ctx context.Context, s leaseapi.CredentialStore, w io.Writer) error {
			if err := s.CreateCredential(ctx, &c); err != nil {
				return fmt.Errorf("credentials create: %w", err)
			}
			// The token goes to stdout only, once; never to the log.
			_, err := fmt.Fprintln(w, token)
			return err
		}, nil
	case "list":
		if err := parseFlags(fs, args, 0); err != nil {
			return nil, err
		}
		return func(ctx context.Context, s leaseapi.CredentialStore, w io.Writer) error {
			set, err := s.Credentials(ctx)
			if err != nil {
				return fmt.Errorf("credentials list: %w", err)
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tROLE\tSCOPES\tRATE\tCREATED")
			for _, c := range set.Credentials {
				rate := "default"
				if c.RatePerSecond != nil {
					rate = fmt.Sprint(*c.RatePerSecond)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Name, c.Role, strings.Join(c.Scopes, ","), rate,
					c.CreatedAt.Format("2006-01-02T15:04:05Z"))
			}
			return tw.Flush()
		}, nil
	case "revoke":
		if err := parseFlags(fs, args, 1); err != nil {
			return nil, err
		}
		id := fs.Arg(0)
		return func(ctx context.Context, s leaseapi.CredentialStore, w io.Writer) error {
			if err := s.DeleteCredential(ctx, id); err != nil {
				return fmt.Errorf("credentials revoke %s: %w", id, err)
			}
			_, err := fmt.Fprintf(w, "revoked %s\n", id)
			return err
		}, nil
	}
	return nil, fmt.Errorf("unknown credentials command %q: use create, list or revoke (see leaseapi -h)", name)
}

// parseFlags parses args and wants exactly n positional arguments.
func parseFlags(fs *flag.FlagSet, args []string, n int) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s: %w (see leaseapi -h)", fs.Name(), err)
	}
	if fs.NArg() != n {
		return fmt.Errorf("%s takes %d arguments, got %q (see leaseapi -h)", fs.Name(), n, fs.Args())
	}
	return nil
}

// apiClosed reports whether a credential was ever created, so that the
// open-API warning is not logged for an API that is closed.
func apiClosed(ctx context.Context, s leaseapi.CredentialStore) bool {
	set, err := s.Credentials(ctx)
	return err == nil && set.Closed
}
