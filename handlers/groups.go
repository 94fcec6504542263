package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// The concurrency groups. A group's name has the syntax of a job id and
// the caller's scopes cover it as they cover a job id: authorize refuses a
// name outside them (403, before any lookup), and the lists show only the
// groups in scope.

// groupNameParam returns the name path segment unescaped, as jobIDParam
// does for a job id, so that authorize and the handler see the same name.
func groupNameParam(r *http.Request) string {
	name := chi.URLParam(r, "name")
	if strings.Contains(name, "%") {
		if u, err := url.PathUnescape(name); err == nil {
			return u
		}
	}
	return name
}

// groupName returns the validated name of a route that takes no query
// parameters.
func groupName(_ http.ResponseWriter, r *http.Request) (string, error) {
	if _, err := query(r); err != nil {
		return "", err
	}
	name := groupNameParam(r)
	return name, leaseapi.ValidateGroupName("name", name)
}

// groupNotFound gives a missing group its own 404 detail (the store's
// ErrNotFound alone would be answered as a job without a lease).
func groupNotFound(err error) error {
	if errors.Is(err, leaseapi.ErrNotFound) {
		return &requestError{status: http.StatusNotFound, code: api.CodeNotFound,
			detail: "no group of this name exists within your scopes; PUT /groups/{name} creates it, GET /groups lists them"}
	}
	return err
}

func groupBody(r *http.Request, g leaseapi.Group) any {
	return api.FromGroup(visibleHolders(r.Context(), g))
}

// visibleHolders is g with only the holders whose job lies within the
// caller's scopes: a credential with several scopes may put a job of one
// team into another team's group, and a team learns nothing of another's
// jobs. Held still counts every slot in use.
func visibleHolders(ctx context.Context, g leaseapi.Group) leaseapi.Group {
	p := principalFrom(ctx)
	if p == nil || slices.Contains(p.scopes, leaseapi.ScopeAll) {
		return g
	}
	holders := make([]leaseapi.GroupHolder, 0, len(g.Holders))
	for _, h := range g.Holders {
		if p.inScope(h.JobID) {
			holders = append(holders, h)
		}
	}
	g.Holders = holders
	return g
}

func (h *handler) putGroup(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "put_group", putGroupParams, func(ctx context.Context, p *leaseapi.PutGroupParams) (leaseapi.Group, error) {
		g, err := h.store.PutGroup(ctx, p)
		if err == nil {
			loggerFrom(ctx).Info("group put", "group", g.Name, "limit", g.Limit, "by", p.By)
		}
		return g, err
	}, groupBody)
}

func putGroupParams(w http.ResponseWriter, r *http.Request) (*leaseapi.PutGroupParams, error) {
	name, err := groupName(w, r)
	if err != nil {
		return nil, err
	}
	var req api.PutGroupRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	// Clamped to just outside the domain's range first, so that no
	// out-of-range integer wraps into a valid limit; Validate refuses it.
	limit := min(max(req.Limit, leaseapi.MinGroupLimit-1), leaseapi.MaxGroupLimit+1)
	p := &leaseapi.PutGroupParams{Name: name, Limit: int(limit), By: principalFrom(r.Context()).audit()}
	return p, p.Validate()
}

func (h *handler) getGroup(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "get_group", groupName, func(ctx context.Context, name string) (leaseapi.Group, error) {
		g, err := h.store.Group(ctx, name)
		return g, groupNotFound(err)
	}, groupBody)
}

func (h *handler) deleteGroup(w http.ResponseWriter, r *http.Request) {
	name, err := groupName(w, r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	_, err = call(r.Context(), h.metrics, "delete_group", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, h.store.DeleteGroup(ctx, name)
	})
	if err != nil {
		writeProblem(w, r, groupNotFound(err))
		return
	}
	loggerFrom(r.Context()).Info("group deleted", "group", name)
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) leaveGroup(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "leave_group", pathAndNoQuery, h.store.LeaveGroup, func(r *http.Request, l leaseapi.Lease) any {
		loggerFrom(r.Context()).Info("job left its group", "job_id", l.JobID)
		return api.FromLease(l)
	})
}

func (h *handler) listGroups(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "list_groups", groupListParams, h.groupsInScope, func(r *http.Request, page leaseapi.GroupPage) any {
		for i := range page.Groups {
			page.Groups[i] = visibleHolders(r.Context(), page.Groups[i])
		}
		out := api.GroupList{Groups: api.FromGroups(page.Groups)}
		if page.More && len(page.Groups) > 0 {
			c := encodeCursor(page.Groups[len(page.Groups)-1].Name)
			out.NextCursor = &c
		}
		return out
	})
}

// groupListParams validates the query of GET /groups.
func groupListParams(_ http.ResponseWriter, r *http.Request) (*leaseapi.GroupListParams, error) {
	q, err := query(r, "prefix", "limit", "cursor")
	if err != nil {
		return nil, err
	}
	p := &leaseapi.GroupListParams{Prefix: q.Get("prefix")}
	if q.Has("cursor") {
		if p.After, err = decodeCursor(q.Get("cursor")); err != nil {
			return nil, err
		}
	}
	if p.Limit, err = parseLimit(q, 100); err != nil {
		return nil, err
	}
	return p, p.Validate()
}

// groupsInScope lists one page of the groups the caller may see, as
// listInScope lists leases: the store's list under each of its scoped
// prefixes in turn. A cursor is only a name to start after, so a forged
// one can skip groups but never lead out of scope.
func (h *handler) groupsInScope(ctx context.Context, p *leaseapi.GroupListParams) (leaseapi.GroupPage, error) {
	prefixes := scopedPrefixes(principalFrom(ctx).scopes, p.Prefix)
	if len(prefixes) == 1 && prefixes[0] == p.Prefix {
		return h.store.Groups(ctx, p)
	}
	groups, more, err := pageInScope(prefixes, p.After, p.Limit, func(prefix string, limit int) ([]leaseapi.Group, bool, error) {
		q := *p
		q.Prefix, q.Limit = prefix, limit
		sub, err := h.store.Groups(ctx, &q)
		return sub.Groups, sub.More, err
	})
	if err != nil {
		return leaseapi.GroupPage{}, err
	}
	if groups == nil {
		groups = []leaseapi.Group{}
	}
	return leaseapi.GroupPage{Groups: groups, More: more}, nil
}

// acquireGroup checks the group of a valid acquire (nil keeps the stored
// one, "" leaves any, a name joins it): a name outside the caller's scopes
// is refused exactly as a group that does not exist, so that the answer
// says nothing of another team's groups.
func acquireGroup(r *http.Request, group *string) error {
	if group != nil && *group != "" && !principalFrom(r.Context()).inScope(*group) {
		return leaseapi.UnknownGroup(*group)
	}
	return nil
}
