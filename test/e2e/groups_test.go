package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestGroupEndToEnd: six cronreplica processes run ten jobs of one
// concurrency group of limit 3, every second, for 20 seconds. By the
// replicas' own records never more than three runs are in progress at
// once, by the service's history never more than three grants are held
// at once (database clock) and the slot tokens of the group increase with
// every grant; and every job still runs.
func TestGroupEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("skipping the end-to-end test in -short mode")
	}
	const (
		groupReplicas = 6
		groupJobs     = 10
		limit         = 3
		groupWindow   = 20 * time.Second
		// groupExtraWindow bounds the wait for a job that has not run
		// in groupWindow.
		groupExtraWindow = 60 * time.Second
		// work is at most a second × limit / jobs: the jobs can all run.
		groupWork = 150 * time.Millisecond
		group     = "e2e-group"
	)
	bin, procs, baseURL, c := startService(t, "leaseapi-groups", repotest.PostgresURL(t))
	dir := procs.dir
	put, err := c.PutGroupWithResponse(t.Context(), group, client.PutGroupJSONRequestBody{Limit: limit})
	if err != nil || put.JSON200 == nil {
		t.Fatalf("PUT /groups/%s: %v %v", group, err, put)
	}

	jobIDs := make([]string, groupJobs)
	args := []string{"-api", baseURL, "-ttl", ttl.String(), "-heartbeat", heartbeat.String(), "-group", group,
		"-request-timeout", requestTimeout.String(), "-work", groupWork.String(), "-log-level", "warn"}
	for i := range jobIDs {
		jobIDs[i] = fmt.Sprintf("group-job-%02d", i)
		args = append(args, "-job", jobIDs[i]+"=* * * * * *")
	}
	owners := make([]string, groupReplicas)
	reps := make([]*process, groupReplicas)
	for i := range owners {
		owners[i] = fmt.Sprintf("group-replica-%d", i)
		reps[i] = procs.start(owners[i], filepath.Join(bin, "cronreplica"),
			append(slices.Clone(args), "-owner", owners[i], "-record", recordPath(dir, owners[i])))
	}
	start := time.Now()
	time.Sleep(groupWindow)
	// Which jobs win a tick's three slots is up to timing; on a loaded
	// machine one job can lose every tick of the window. The replicas
	// keep running, for a bounded while, until every job has run once.
	for deadline := time.Now().Add(groupExtraWindow); time.Now().Before(deadline) && !everyJobRan(c, jobIDs); {
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range reps {
		p.signal(syscall.SIGTERM)
	}
	for i, p := range reps {
		if err := p.wait(15 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", owners[i], err)
		}
	}

	// The replicas' records: at most limit runs in progress at once.
	type edge struct {
		at    time.Time
		delta int
		what  string
	}
	var edges []edge
	ran := make(map[string]int)
	for _, owner := range owners {
		for _, r := range readRecords(t, recordPath(dir, owner), false) {
			from, err1 := api.ParseTime(r.Start)
			to, err2 := api.ParseTime(r.End)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: record %+v: %v %v", owner, r, err1, err2)
			}
			edges = append(edges, edge{from, 1, r.Job + " by " + owner}, edge{to, -1, r.Job})
			ran[r.Job]++
		}
	}
	if most, at := mostAtOnce(edges, func(e edge) (time.Time, int) { return e.at, e.delta }); most > limit {
		t.Errorf("records: %d runs in progress at once at %s, want at most %d", most, at.Format(time.TimeOnly+".000"), limit)
	}

	// The service's history: at most limit grants held at once, and the
	// slot tokens strictly increasing in the order of the grants.
	var held []edge
	type grant struct {
		start     time.Time
		slotToken int64
		job       string
	}
	var grants []grant
	for _, id := range jobIDs {
		if !everyJobRan(c, []string{id}) {
			continue // never granted: no runs to list, reported below
		}
		for _, r := range listRuns(t, c, id) {
			if r.Group == nil || *r.Group != group || r.Slot == nil || r.SlotToken == nil || r.StartedAt == nil {
				t.Fatalf("%s: run %+v is not in %s with a slot", id, r, group)
			}
			end := time.Now().Add(time.Hour)
			if r.EndedAt != nil {
				end = *r.EndedAt
			}
			held = append(held, edge{*r.StartedAt, 1, id}, edge{end, -1, id})
			grants = append(grants, grant{*r.StartedAt, *r.SlotToken, id})
		}
	}
	if most, at := mostAtOnce(held, func(e edge) (time.Time, int) { return e.at, e.delta }); most > limit {
		t.Errorf("service: %d grants held at once at %s, want at most %d", most, at.Format(time.TimeOnly+".000"), limit)
	}
	sort.Slice(grants, func(i, j int) bool { return grants[i].start.Before(grants[j].start) })
	for i := 1; i < len(grants); i++ {
		if grants[i].slotToken <= grants[i-1].slotToken && grants[i].start.After(grants[i-1].start) {
			t.Errorf("slot tokens: %s's grant at %s has %d after %s's %d", grants[i].job, grants[i].start.Format(api.TimeLayout),
				grants[i].slotToken, grants[i-1].job, grants[i-1].slotToken)
		}
	}

	// Every job still runs.
	for _, id := range jobIDs {
		if ran[id] == 0 {
			t.Errorf("%s never ran in %s (runs per job: %v)", id, groupWindow+groupExtraWindow, ran)
		}
	}
	g, err := c.GetGroupWithResponse(context.Background(), group)
	if err != nil || g.JSON200 == nil {
		t.Fatalf("GET /groups/%s: %v %v", group, err, g)
	}
	t.Logf("%d runs of %d jobs in %s from %s; the group now: %d held", len(grants), groupJobs, groupWindow,
		start.Format(time.TimeOnly), g.JSON200.Held)
}

// mostAtOnce is the largest number of intervals open at one instant, given
// their edges (+1 at a start, -1 at an end; at one instant the ends count
// first: an interval that ends when another starts does not overlap it),
// and the first instant it is reached.
func mostAtOnce[E any](edges []E, of func(E) (time.Time, int)) (int, time.Time) {
	sort.SliceStable(edges, func(i, j int) bool {
		ai, di := of(edges[i])
		aj, dj := of(edges[j])
		if !ai.Equal(aj) {
			return ai.Before(aj)
		}
		return di < dj
	})
	open, most := 0, 0
	var at time.Time
	for _, e := range edges {
		t, d := of(e)
		open += d
		if open > most {
			most, at = open, t
		}
	}
	return most, at
}

// everyJobRan reports whether each of the jobs has a lease: it was granted
// at least once.
func everyJobRan(c *client.ClientWithResponses, jobIDs []string) bool {
	for _, id := range jobIDs {
		resp, err := c.GetLeaseWithResponse(context.Background(), id)
		if err != nil || resp.JSON200 == nil {
			return false
		}
	}
	return true
}
