package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi/api/client"
)

// declaredServer is a leaseapi of its own (apply --prune acts on all it
// sees), its admin client and the environment leasectl runs with there.
type declaredServer struct {
	c   *client.ClientWithResponses
	env []string
}

func startDeclaredServer(t *testing.T) *declaredServer {
	t.Helper()
	cmd, url, err := startLeaseapi(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c, err := client.NewClientWithResponses(url, client.WithBearerToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	return &declaredServer{c: c, env: []string{"LEASEAPI_URL=" + url, "LEASEAPI_TOKEN=" + adminToken}}
}

// run runs leasectl against s with env added, to its end.
func (s *declaredServer) run(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := startEnv(t, append(slices.Clone(s.env), env...), args...)
	code = p.wait(t)
	return code, p.stdout.String(), p.stderr.String()
}

// job makes job exist: one run, released.
func (s *declaredServer) job(t *testing.T, job string) {
	t.Helper()
	ctx := context.Background()
	a, err := s.c.AcquireLeaseWithResponse(ctx, job, client.AcquireRequest{Owner: "test"})
	if err != nil || a.JSON200 == nil {
		t.Fatalf("acquire %s: %v %s", job, err, a.Body)
	}
	r, err := s.c.ReleaseLeaseWithResponse(ctx, job, client.ReleaseRequest{Owner: "test", Token: a.JSON200.Token})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("release %s: %v %s", job, err, r.Body)
	}
}

// snapshot is the server's state as the tests compare it.
type snapshot struct {
	groups   map[string]int64
	paused   map[string]string
	webhooks map[string]client.Webhook
}

func (s *declaredServer) snapshot(t *testing.T) snapshot {
	t.Helper()
	ctx := context.Background()
	out := snapshot{groups: map[string]int64{}, paused: map[string]string{}, webhooks: map[string]client.Webhook{}}
	g, err := s.c.ListGroupsWithResponse(ctx, nil)
	if err != nil || g.JSON200 == nil {
		t.Fatalf("list groups: %v", err)
	}
	for _, x := range g.JSON200.Groups {
		out.groups[x.Name] = x.Limit
	}
	l, err := s.c.ListLeasesWithResponse(ctx, nil)
	if err != nil || l.JSON200 == nil {
		t.Fatalf("list leases: %v", err)
	}
	for _, x := range l.JSON200.Leases {
		if x.Paused {
			out.paused[x.JobId] = deref(x.PausedReason)
		}
	}
	w, err := s.c.ListWebhooksWithResponse(ctx)
	if err != nil || w.JSON200 == nil {
		t.Fatalf("list webhooks: %v", err)
	}
	for _, x := range w.JSON200.Webhooks {
		out.webhooks[deref(x.Name)] = x
	}
	return out
}

func (a snapshot) equal(b snapshot) bool {
	if len(a.webhooks) != len(b.webhooks) {
		return false
	}
	for name, w := range a.webhooks {
		if b.webhooks[name].Id != w.Id {
			return false
		}
	}
	return maps.Equal(a.groups, b.groups) && maps.Equal(a.paused, b.paused)
}

const declaredFile = `# the operating rules of team a
groups:
  - {name: reports, limit: 3}
pauses:
  - job: "team-a:old"
    reason: replaced by report-v2
webhooks:
  - name: oncall
    url: {env: ONCALL_URL}
    secret: {env: ONCALL_SECRET}
    events: [job.alerting, job.ok]
    scopes: ["team-a:"]
    format: standard
`

const (
	oncallURL    = "https://hooks.example.com/oncall"
	oncallSecret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"
	otherSecret  = "whsec_ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4"
)

// TestApplyAndExport: apply makes the server what the file declares and
// prints the changes; a second apply prints "no changes" and changes
// nothing, nor does --dry-run; export then apply changes nothing; a
// changed secret replaces the webhook; --prune resumes a pause no longer
// declared and deletes what the file dropped.
func TestApplyAndExport(t *testing.T) {
	t.Parallel()
	s := startDeclaredServer(t)
	s.job(t, "team-a:old")
	s.job(t, "team-a:report")
	dir := t.TempDir()
	file := filepath.Join(dir, "jobs.yaml")
	if err := os.WriteFile(file, []byte(declaredFile), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"ONCALL_URL=" + oncallURL, "ONCALL_SECRET=" + oncallSecret}

	code, stdout, stderr := s.run(t, env, "apply", "-f", file)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, line := range []string{"+ group reports: limit 3", `+ pause team-a:old: "replaced by report-v2"`,
		"+ webhook oncall: job.alerting,job.ok to team-a:", "3 changes made"} {
		if !strings.Contains(stdout, line+"\n") {
			t.Errorf("apply printed %q, want the line %q", stdout, line)
		}
	}
	applied := s.snapshot(t)
	hook := applied.webhooks["oncall"]
	if applied.groups["reports"] != 3 || applied.paused["team-a:old"] != "replaced by report-v2" ||
		hook.Digest == nil || *hook.Digest != hmacHex(oncallSecret, oncallURL) || !slices.Equal(hook.Scopes, []string{"team-a:"}) {
		t.Fatalf("after apply: %+v, want the group, the pause and the webhook declared", applied)
	}

	// Again: nothing to do.
	code, stdout, stderr = s.run(t, env, "apply", "-f", file)
	if code != 0 || stdout != "no changes\n" {
		t.Errorf("second apply: exit %d, %q %q; want no changes", code, stdout, stderr)
	}
	if now := s.snapshot(t); !now.equal(applied) {
		t.Errorf("second apply changed the server: %+v, was %+v", now, applied)
	}

	// --dry-run prints a change and makes none.
	changed := filepath.Join(dir, "changed.yaml")
	if err := os.WriteFile(changed, []byte(strings.Replace(declaredFile, "limit: 3", "limit: 4", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = s.run(t, env, "apply", "--dry-run", "-f", changed)
	if code != 0 || stdout != "~ group reports: limit 3 -> 4\ndry run: 1 changes not made\n" {
		t.Errorf("apply --dry-run: exit %d, %q %q", code, stdout, stderr)
	}
	if now := s.snapshot(t); !now.equal(applied) {
		t.Errorf("apply --dry-run changed the server: %+v, was %+v", now, applied)
	}

	// export, then apply what it wrote: nothing to do.
	code, exported, stderr := s.run(t, nil, "export")
	if code != 0 || stderr != "" {
		t.Fatalf("export: exit %d, %q", code, stderr)
	}
	for _, want := range []string{"name: reports", "limit: 3", "job: team-a:old", "reason: replaced by report-v2",
		"name: oncall", "url: {env: ONCALL_URL}", "secret: {env: ONCALL_SECRET}", "events: [job.alerting, job.ok]"} {
		if !strings.Contains(exported, want) {
			t.Errorf("export wrote:\n%s\nwant it to hold %q", exported, want)
		}
	}
	if strings.Contains(exported, oncallSecret) || strings.Contains(exported, oncallURL) {
		t.Errorf("export wrote the webhook's URL or secret:\n%s", exported)
	}
	exportedFile := filepath.Join(dir, "exported.yaml")
	if err := os.WriteFile(exportedFile, []byte(exported), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = s.run(t, env, "apply", "--prune", "-f", exportedFile)
	if code != 0 || stdout != "no changes\n" {
		t.Errorf("apply --prune of the export: exit %d, %q %q; want no changes", code, stdout, stderr)
	}
	if now := s.snapshot(t); !now.equal(applied) {
		t.Errorf("apply of the export changed the server: %+v, was %+v", now, applied)
	}

	// A new secret: the webhook is replaced (a new id, the new digest).
	code, stdout, stderr = s.run(t, []string{"ONCALL_URL=" + oncallURL, "ONCALL_SECRET=" + otherSecret}, "apply", "-f", file)
	if code != 0 || !strings.Contains(stdout, "~ webhook oncall: url or secret: replace "+hook.Id+"\n") {
		t.Errorf("apply with a new secret: exit %d, %q %q; want the webhook replaced", code, stdout, stderr)
	}
	replaced := s.snapshot(t).webhooks["oncall"]
	if replaced.Id == hook.Id || replaced.Digest == nil || *replaced.Digest != hmacHex(otherSecret, oncallURL) {
		t.Errorf("after a new secret: webhook %+v, want a new one with the new digest", replaced)
	}

	// --prune with the pause and the webhook gone from the file.
	pruned := filepath.Join(dir, "pruned.yaml")
	if err := os.WriteFile(pruned, []byte("groups:\n  - {name: reports, limit: 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = s.run(t, nil, "apply", "-f", pruned)
	if code != 0 || stdout != "no changes\n" {
		t.Errorf("apply of less without --prune: exit %d, %q %q; want no changes", code, stdout, stderr)
	}
	code, stdout, stderr = s.run(t, nil, "apply", "--prune", "-f", pruned)
	if code != 0 || !strings.Contains(stdout, "- pause team-a:old (resume)\n") || !strings.Contains(stdout, "- webhook oncall ("+replaced.Id+")\n") {
		t.Errorf("apply --prune: exit %d, %q %q; want the resume and the delete", code, stdout, stderr)
	}
	if now := s.snapshot(t); len(now.paused) != 0 || len(now.webhooks) != 0 || now.groups["reports"] != 3 {
		t.Errorf("after apply --prune: %+v, want only the group", now)
	}
}

// TestApplyRefusesABadFile: a bad file is exit 64 naming the line, and
// nothing is read or changed.
func TestApplyRefusesABadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct{ name, file, want string }{
		{"UnknownKey", "groups:\n  - name: reports\n    limit: 3\n    size: 4\n", "line 4: field size not found"},
		{"UnknownSection", "groups: []\njobs: []\n", "line 2: field jobs not found"},
		{"WrongType", "groups:\n  - name: reports\n    limit: many\n", "line 3: cannot unmarshal"},
		{"BadLimit", "groups:\n  - {name: a, limit: 1}\n  - {name: reports, limit: 0}\n", "line 3: groups[1]: limit must be"},
		{"Twice", "pauses:\n  - job: a\n  - job: b\n  - job: a\n", `line 4: pauses[2]: "a" is declared again (first at line 2)`},
		{"SecretInFile", "webhooks:\n  - {name: x, url: \"https://h.example\", secret: whsec_x, events: [run.failed], scopes: [\"*\"]}\n", "line 2: webhooks[0]: secret must be {env: NAME}"},
		{"BadWebhookName", "webhooks:\n  - {name: On Call, url: {env: U}, secret: {env: S}, events: [run.failed], scopes: [\"*\"]}\n", "line 2: webhooks[0]: name must be 1 to 64 characters"},
		{"BadPolicy", "policies:\n  - job: a\n    recoveryThreshold: 2\n", "line 2: policies[0]: invalid policy: must set at least one of"},
		{"NotYAML", "groups: [\n", "line 1: did not find expected node content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			// An address nobody serves: a file refused is never sent.
			p := startEnv(t, []string{"LEASEAPI_URL=http://127.0.0.1:1", "LEASEAPI_TOKEN=" + adminToken}, "apply", "-f", file)
			if code := p.wait(t); code != 64 || !strings.Contains(p.stderr.String(), tc.want) {
				t.Errorf("apply: exit %d, %q; want 64 and %q", code, p.stderr.String(), tc.want)
			}
		})
	}
}

// TestApplyPolicies: apply puts the declared policies, changes one that
// differs, and with --prune deletes one no longer declared; export then
// apply changes nothing; a policy of a job that has no lease is exit 1.
func TestApplyPolicies(t *testing.T) {
	t.Parallel()
	s := startDeclaredServer(t)
	s.job(t, "team-a:report")
	s.job(t, "team-a:sync")
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	both := write("both.yaml", `policies:
  - job: "team-a:report"
    consecutiveFailures: 3
    recoveryThreshold: 2
  - job: "team-a:sync"
    failureRate: {threshold: 0.5, runs: 10}
    realertAfterMs: 3600000
`)
	code, stdout, stderr := s.run(t, nil, "apply", "-f", both)
	want := "+ policy team-a:report: consecutiveFailures 3, recoveryThreshold 2\n" +
		"+ policy team-a:sync: failureRate 0.5 of 10, recoveryThreshold 1, realertAfterMs 3600000\n2 changes made\n"
	if code != 0 || stdout != want {
		t.Fatalf("apply: exit %d, %q %q; want %q", code, stdout, stderr, want)
	}
	policy := func(job string) *client.JobPolicy {
		t.Helper()
		resp, err := s.c.GetPolicyWithResponse(context.Background(), job)
		if err != nil {
			t.Fatalf("GET policy of %s: %v", job, err)
		}
		return resp.JSON200
	}
	if p := policy("team-a:report"); p == nil || p.ConsecutiveFailures == nil || *p.ConsecutiveFailures != 3 || p.RecoveryThreshold != 2 {
		t.Errorf("policy of team-a:report: %+v, want consecutiveFailures 3, recoveryThreshold 2", p)
	}
	if p := policy("team-a:sync"); p == nil || p.FailureRate == nil || p.FailureRate.Runs != 10 || p.RecoveryThreshold != 1 ||
		p.RealertAfterMs == nil || *p.RealertAfterMs != 3600000 {
		t.Errorf("policy of team-a:sync: %+v, want failureRate 0.5 of 10, realertAfterMs 3600000", p)
	}
	if code, stdout, stderr := s.run(t, nil, "apply", "-f", both); code != 0 || stdout != "no changes\n" {
		t.Errorf("second apply: exit %d, %q %q; want no changes", code, stdout, stderr)
	}

	code, exported, stderr := s.run(t, nil, "export")
	if code != 0 || !strings.Contains(exported, "job: team-a:report") || !strings.Contains(exported, "consecutiveFailures: 3") {
		t.Fatalf("export: exit %d, %q %q; want both policies", code, exported, stderr)
	}
	if code, stdout, stderr := s.run(t, nil, "apply", "--prune", "-f", write("exported.yaml", exported)); code != 0 || stdout != "no changes\n" {
		t.Errorf("apply --prune of the export: exit %d, %q %q; want no changes\n%s", code, stdout, stderr, exported)
	}

	one := write("one.yaml", "policies:\n  - {job: \"team-a:report\", consecutiveFailures: 4, recoveryThreshold: 2}\n")
	code, stdout, stderr = s.run(t, nil, "apply", "--prune", "-f", one)
	want = "~ policy team-a:report: consecutiveFailures 3, recoveryThreshold 2 -> consecutiveFailures 4, recoveryThreshold 2\n" +
		"- policy team-a:sync\n2 changes made\n"
	if code != 0 || stdout != want {
		t.Errorf("apply --prune of one: exit %d, %q %q; want %q", code, stdout, stderr, want)
	}
	if p := policy("team-a:report"); p == nil || *p.ConsecutiveFailures != 4 {
		t.Errorf("policy of team-a:report: %+v, want consecutiveFailures 4", p)
	}
	if p := policy("team-a:sync"); p != nil {
		t.Errorf("policy of team-a:sync after --prune: %+v, want none", p)
	}

	code, _, stderr = s.run(t, nil, "apply", "-f", write("nolease.yaml", "policies:\n  - {job: \"team-a:never\", missedTicks: 2}\n"))
	if code != 1 || !strings.Contains(stderr, "policy team-a:never") || !strings.Contains(stderr, "not_found") {
		t.Errorf("apply of a job without a lease: exit %d, %q; want 1 and not_found", code, stderr)
	}
}

// TestApplyNeedsAdmin: a token that may not manage webhooks (nor groups)
// is exit 77 before any change, for apply and export alike.
func TestApplyNeedsAdmin(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(file, []byte("groups:\n  - {name: declared-by-user, limit: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"apply", "-f", file}, {"export"}} {
		if code, stdout, stderr := leasectl(t, userToken, args...); code != 77 || !strings.Contains(stderr, "403") {
			t.Errorf("%q with a user token: exit %d, %q %q; want 77 and 403", args, code, stdout, stderr)
		}
	}
	resp, err := apiClient(t, adminToken).GetGroupWithResponse(context.Background(), "declared-by-user")
	if err != nil || resp.StatusCode() != 404 {
		t.Errorf("group declared-by-user after a refused apply: %v %s, want 404", err, resp.Body)
	}
}
