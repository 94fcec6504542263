//go:build chaos

package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/internal/checker"
)

// The concurrency groups of a chaos run (I13): the harness creates each
// group with PUT /groups/{name} before the replicas start; each group has
// jobs of its own besides the run's other jobs, which every replica runs
// every GroupPeriod and which join the group with every acquire. All the
// members of a group tick at once, so at every tick the group's limit is
// reached and the members beyond it are refused group_full.
//
// A member's run lasts from GroupWorkMin, longer than the members' grace,
// so a refused tick still finds every slot in use when its grace ends and
// the sweep records it missed with groupFull (I10 does not want it run;
// the refusal's Retry-After, a slot's expiry, lies past the grace, so the
// runner does not retry it either), to at most GroupPeriod × limit /
// members, so that in turn the members can all run.

// groupSpec is one concurrency group of a run.
type groupSpec struct {
	Name    string
	Limit   int
	Members int
}

// defaultGroups are the groups of every tier: limit 1 over 5 jobs and
// limit 2 over 5 jobs.
func defaultGroups() []groupSpec {
	return []groupSpec{{Name: "k1", Limit: 1, Members: 5}, {Name: "k2", Limit: 2, Members: 5}}
}

// The schedule and work of the groups' jobs in every tier: every 4 s, with
// a grace of 500 ms, working from 600 ms.
const (
	groupPeriod  = 4 * time.Second
	groupGrace   = 500 * time.Millisecond
	groupWorkMin = 600 * time.Millisecond
)

// groupWorkMax is the longest run of a group's job: GroupPeriod × limit /
// members of the tightest group, and no longer than workMax (the checker's
// MaxRun assumes it).
func (cfg *runConfig) groupWorkMax() time.Duration {
	longest := workMax
	for _, g := range cfg.Groups {
		longest = min(longest, cfg.GroupPeriod*time.Duration(g.Limit)/time.Duration(g.Members))
	}
	return longest
}

// groupJob is a job of a group: its id ("k1.job-03") and its group.
type groupJob struct{ id, group string }

// groupJobs are the jobs of every group of the run, in order.
func (e *env) groupJobs() []groupJob {
	var out []groupJob
	for _, g := range e.cfg.Groups {
		for i := range g.Members {
			out = append(out, groupJob{id: fmt.Sprintf("%s.job-%02d", g.Name, i), group: g.Name})
		}
	}
	return out
}

// groupJobsPattern selects the lease rows of the groups' jobs (see
// workloadJobs): group names are k and a digit.
const groupJobsPattern = `job_id LIKE 'k_.job-%'`

// allJobIDs are the ids of every job of the run: the jobs, then the
// groups' jobs.
func (e *env) allJobIDs() []string {
	ids := e.jobIDs()
	for _, j := range e.groupJobs() {
		ids = append(ids, j.id)
	}
	return ids
}

// groupArgs are the replica's arguments for the groups' jobs.
func (e *env) groupArgs() []string {
	jobs := e.groupJobs()
	if len(jobs) == 0 {
		return nil
	}
	var pairs []string
	for _, j := range jobs {
		pairs = append(pairs, j.id+"="+j.group)
	}
	return []string{
		"-group-jobs", strings.Join(pairs, ","), "-group-period", e.cfg.GroupPeriod.String(),
		"-group-grace", e.cfg.GroupGrace.String(),
		"-group-work-min", e.cfg.GroupWorkMin.String(), "-group-work-max", e.cfg.groupWorkMax().String(),
	}
}

// createGroups creates the run's groups through instance 0 (with the
// admin token unless the instances are open), retrying while the service
// is not ready to answer.
func (e *env) createGroups() error {
	for _, g := range e.cfg.Groups {
		body, err := json.Marshal(api.PutGroupRequest{Limit: int64(g.Limit)})
		if err != nil {
			return err
		}
		url := fmt.Sprintf("http://127.0.0.1:%d/groups/%s", e.insts[0].port, g.Name)
		deadline := time.Now().Add(30 * time.Second)
		for {
			req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			if !e.open {
				req.Header.Set("Authorization", "Bearer "+adminToken)
			}
			resp, err := e.httpc.Do(req)
			status := 0
			if err == nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			if status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) || (status != 0 && status != http.StatusServiceUnavailable && status != http.StatusTooManyRequests) {
				return fmt.Errorf("PUT /groups/%s: status %d, error %v", g.Name, status, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if len(e.cfg.Groups) > 0 {
		e.logf("groups created: %v", e.cfg.Groups)
	}
	return nil
}

// groupHistory adds the groups and their jobs' schedules to h.
func (e *env) groupHistory(h *checker.History) {
	for _, g := range e.cfg.Groups {
		cg := checker.Group{Name: g.Name, Limit: g.Limit}
		for _, j := range e.groupJobs() {
			if j.group == g.Name {
				cg.Jobs = append(cg.Jobs, j.id)
			}
		}
		h.Groups = append(h.Groups, cg)
	}
	for _, j := range e.groupJobs() {
		if h.Schedules == nil {
			h.Schedules = make(map[string]checker.Schedule)
		}
		h.Schedules[j.id] = checker.Schedule{Period: e.cfg.GroupPeriod, Grace: e.cfg.GroupGrace}
	}
}

// groupsNotExercised says what the groups of a run with cfg should have
// shown and did not: acquires refused group_full, and every group at its
// limit at some grant.
func groupsNotExercised(cfg *runConfig, r *checker.Report) []string {
	if len(cfg.Groups) == 0 {
		return nil
	}
	var missing []string
	if r.Stats.GroupFullRefusals == 0 {
		missing = append(missing, "no acquire was refused group_full")
	}
	for _, g := range cfg.Groups {
		if r.Stats.GroupPeak[g.Name] < g.Limit {
			missing = append(missing, fmt.Sprintf("group %s never had %d holders at once", g.Name, g.Limit))
		}
	}
	return missing
}
