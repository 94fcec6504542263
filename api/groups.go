package api

import (
	"strconv"

	"github.com/leaseapi/leaseapi"
)

// PutGroupRequest is the body of PUT /groups/{name}.
type PutGroupRequest struct {
	// Limit is how many of the group's jobs may hold a lease at once,
	// leaseapi.MinGroupLimit to leaseapi.MaxGroupLimit.
	Limit int64 `json:"limit"`
}

// Group is a concurrency group on the wire: the Group schema of
// api/openapi.yaml.
type Group struct {
	Name  string `json:"name"`
	Limit int64  `json:"limit"`
	// Held is how many slots are in use; it may exceed Limit for a while
	// after the limit was lowered.
	Held      int64         `json:"held"`
	Holders   []GroupHolder `json:"holders"`
	CreatedBy *string       `json:"createdBy"`
	CreatedAt Time          `json:"createdAt"`
}

// GroupHolder is a grant that holds one of a group's slots.
type GroupHolder struct {
	JobID     string `json:"jobId"`
	Owner     string `json:"owner"`
	Token     int64  `json:"token"`
	Slot      int64  `json:"slot"`
	SlotToken int64  `json:"slotToken"`
	// ExpiresAt is when the slot frees by itself.
	ExpiresAt Time `json:"expiresAt"`
}

// GroupList is one page of GET /groups.
type GroupList struct {
	Groups []Group `json:"groups"`
	// NextCursor is the cursor of the next page, or nil on the last page.
	NextCursor *string `json:"nextCursor"`
}

// FromGroup converts a domain group to its wire form; Holders is never
// nil.
func FromGroup(g leaseapi.Group) Group {
	out := Group{
		Name: g.Name, Limit: int64(g.Limit), Held: int64(g.Held),
		Holders:   make([]GroupHolder, 0, len(g.Holders)),
		CreatedBy: stringPtr(g.CreatedBy), CreatedAt: NewTime(g.CreatedAt),
	}
	for _, h := range g.Holders {
		out.Holders = append(out.Holders, GroupHolder{JobID: h.JobID, Owner: h.Owner, Token: h.Token,
			Slot: int64(h.Slot), SlotToken: h.SlotToken, ExpiresAt: NewTime(h.ExpiresAt)})
	}
	return out
}

// FromGroups converts a page of domain groups; the result is never nil.
func FromGroups(gs []leaseapi.Group) []Group {
	out := make([]Group, 0, len(gs))
	for _, g := range gs {
		out = append(out, FromGroup(g))
	}
	return out
}

// appendJSON appends g's JSON object to b, as encoding/json encodes it (a
// group_full problem carries it, and problems are encoded without
// reflection).
func (g *Group) appendJSON(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, g.Name)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, g.Limit, 10)
	b = append(b, `,"held":`...)
	b = strconv.AppendInt(b, g.Held, 10)
	b = append(b, `,"holders":`...)
	if g.Holders == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range g.Holders {
			h := &g.Holders[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"jobId":`...)
			b = appendString(b, h.JobID)
			b = append(b, `,"owner":`...)
			b = appendString(b, h.Owner)
			b = append(b, `,"token":`...)
			b = strconv.AppendInt(b, h.Token, 10)
			b = append(b, `,"slot":`...)
			b = strconv.AppendInt(b, h.Slot, 10)
			b = append(b, `,"slotToken":`...)
			b = strconv.AppendInt(b, h.SlotToken, 10)
			b = append(b, `,"expiresAt":`...)
			b = h.ExpiresAt.appendJSON(b)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"createdBy":`...)
	b = appendStringPtr(b, g.CreatedBy)
	b = append(b, `,"createdAt":`...)
	b = g.CreatedAt.appendJSON(b)
	return append(b, '}')
}
