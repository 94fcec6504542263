package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api/client"
)

// Concurrency groups: `leasectl groups list|get|put|delete`, and
// `leasectl run --group NAME` (run.go) to put a job in one.

const groupsUsage = `Usage:
  leasectl groups list [flags]                 list the concurrency groups (all pages)
  leasectl groups get [flags] NAME             show a group and the grants in its slots
  leasectl groups put [flags] --limit K NAME   create a group of limit K, or change its limit (admin)
  leasectl groups delete [flags] NAME          delete a group no job is in (admin)

A group lets at most K of its jobs hold a lease at once; a job joins it with
'leasectl run --group NAME'. Flags come before NAME; 'leasectl groups ACTION -h'
describes an action's flags.
`

// groupsCommand is `leasectl groups`; it returns the exit status.
func groupsCommand(ctx context.Context, args []string, env environment) int {
	if len(args) == 0 {
		fmt.Fprint(env.stderr, groupsUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(env.stdout, groupsUsage)
		return 0
	}
	err := groups(ctx, args[0], args[1:], env)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintf(env.stderr, "leasectl groups %s: %v\n", args[0], err)
	return errorExit(err)
}

func groups(ctx context.Context, action string, args []string, env environment) error {
	switch action {
	case "list", "get", "put", "delete":
	default:
		return usagef("unknown action %q: want list, get NAME, put --limit K NAME or delete NAME", action)
	}
	fs := newFlagSet("groups "+action, env.stderr)
	apiURL, caFile := apiFlags(fs, env)
	output := fs.String("o", "", "output format: json prints the API's JSON (default a table)")
	var prefix string
	var limit int64
	switch action {
	case "list":
		fs.StringVar(&prefix, "prefix", "", "only groups whose name starts with this prefix")
	case "put":
		fs.Int64Var(&limit, "limit", 0, fmt.Sprintf("how many of the group's jobs may hold a lease at once (%d to %d; required)", leaseapi.MinGroupLimit, leaseapi.MaxGroupLimit))
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *output != "" && *output != "json" {
		return usagef("-o %q: want json (or nothing for a table)", *output)
	}
	var name string
	if action == "list" {
		if fs.NArg() > 0 {
			return usagef("unexpected arguments %q", fs.Args())
		}
		if err := leaseapi.ValidatePrefix(prefix); err != nil {
			return usagef("--prefix %q: want the start of a group name", prefix)
		}
	} else {
		if fs.NArg() != 1 {
			return usagef("want exactly one group NAME, got %q", fs.Args())
		}
		name = fs.Arg(0)
		if err := leaseapi.ValidateGroupName("NAME", name); err != nil {
			return usagef("invalid group NAME %q: want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", name)
		}
	}
	if action == "put" && (limit < leaseapi.MinGroupLimit || limit > leaseapi.MaxGroupLimit) {
		return usagef("--limit %d: want %d to %d", limit, leaseapi.MinGroupLimit, leaseapi.MaxGroupLimit)
	}
	c, err := newClient(*apiURL, *caFile, env.token)
	if err != nil {
		return err
	}
	asJSON := *output == "json"
	switch action {
	case "list":
		return listGroups(ctx, c, prefix, asJSON, env.stdout)
	case "delete":
		if _, err := do(ctx, func(ctx context.Context) (*http.Response, error) {
			return c.DeleteGroup(ctx, name)
		}); err != nil {
			return err
		}
		_, err := fmt.Fprintf(env.stdout, "group %q deleted\n", name)
		return err
	}
	body, err := do(ctx, func(ctx context.Context) (*http.Response, error) {
		if action == "put" {
			return c.PutGroup(ctx, name, client.PutGroupRequest{Limit: limit})
		}
		return c.GetGroup(ctx, name)
	})
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(env.stdout, body)
	}
	g, err := decodeGroup(body)
	if err != nil {
		return err
	}
	if action == "put" {
		_, err := fmt.Fprintf(env.stdout, "group %q: limit %d, %d held\n", g.Name, g.Limit, g.Held)
		return err
	}
	return printGroup(env.stdout, g, time.Now())
}

// groupView is a group as decodeGroup read it: the times it could not
// read are in bad, and each holder's in its own.
type groupView struct {
	client.Group
	bad     unreadable
	holders []holderView
}

type holderView struct {
	client.GroupHolder
	bad unreadable
}

// decodeGroup decodes one group, its holders one by one, so that a time
// it cannot read fails only its field.
func decodeGroup(raw []byte) (groupView, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return groupView{}, fmt.Errorf("decode group: %w", err)
	}
	var holders []json.RawMessage
	if h, ok := fields["holders"]; ok && string(h) != "null" {
		if err := json.Unmarshal(h, &holders); err != nil {
			return groupView{}, fmt.Errorf("decode group holders: %w", err)
		}
	}
	delete(fields, "holders")
	rest, err := json.Marshal(fields)
	if err != nil {
		return groupView{}, err
	}
	var v groupView
	if v.bad, err = decodeTolerant(rest, &v.Group); err != nil {
		return groupView{}, fmt.Errorf("decode group: %w", err)
	}
	v.holders = make([]holderView, len(holders))
	for i, h := range holders {
		if v.holders[i].bad, err = decodeTolerant(h, &v.holders[i].GroupHolder); err != nil {
			return groupView{}, fmt.Errorf("decode group holder: %w", err)
		}
	}
	return v, nil
}

// listGroups follows every page of GET /groups and prints the groups.
func listGroups(ctx context.Context, c *client.ClientWithResponses, prefix string, asJSON bool, w io.Writer) error {
	type page struct {
		Groups     []json.RawMessage `json:"groups"`
		NextCursor *string           `json:"nextCursor"`
	}
	var params client.ListGroupsParams
	if prefix != "" {
		params.Prefix = &prefix
	}
	var all page
	var err error
	all.Groups, _, err = allPages(ctx, "groups", func(ctx context.Context, cursor *string) (*http.Response, error) {
		params.Cursor = cursor
		return c.ListGroups(ctx, &params)
	})
	if err != nil {
		return err
	}
	if asJSON {
		// All pages as one GroupList, with no next page.
		b, err := json.Marshal(all)
		if err != nil {
			return err
		}
		return printJSON(w, b)
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tLIMIT\tHELD\tHOLDERS")
	for _, raw := range all.Groups {
		g, err := decodeGroup(raw)
		if err != nil {
			return err
		}
		holders := "-"
		for i, h := range g.holders {
			if i == 0 {
				holders = h.JobId
			} else {
				holders += "," + h.JobId
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", g.Name, g.Limit, g.Held, holders)
	}
	return tw.Flush()
}

// printGroup prints one group as "FIELD  value" lines, then its holders
// as a table, times relative to now.
func printGroup(w io.Writer, g groupView, now time.Time) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "NAME\t%s\n", g.Name)
	fmt.Fprintf(tw, "LIMIT\t%d\n", g.Limit)
	fmt.Fprintf(tw, "HELD\t%d\n", g.Held)
	fmt.Fprintf(tw, "CREATED\t%s by %s\n", g.bad.at("createdAt", &g.CreatedAt, now), stringOrNone(g.CreatedBy))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(g.holders) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "SLOT\tJOB\tOWNER\tTOKEN\tSLOT TOKEN\tEXPIRES")
	for _, h := range g.holders {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\n", h.Slot, h.JobId, h.Owner, h.Token, h.SlotToken,
			h.bad.at("expiresAt", &h.ExpiresAt, now))
	}
	return tw.Flush()
}
