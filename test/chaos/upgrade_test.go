//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/internal/checker"
)

// The upgrade tier (make chaos-upgrade, docs/reliability.md): a rolling
// upgrade from the previous release under the chaos workload. The previous
// release, the newest line of RELEASES, is built from its commit; two
// instances of it create the database and serve the workload; the new
// release's migrations run (its `leaseapi migrate`) while they serve; the
// instances are replaced one by one with the new release (SIGTERM, then
// the new build on the same address and database proxy); one of them is
// rolled back to the previous release and forward again; then `leaseapi
// upgrade finalize` must succeed and switch the gated rules on. The
// checkers hold the whole run to I1–I14 and to no answer but 200, 409, 429
// and 503. The workload is one the previous release understands (clients
// are never newer than the oldest server): the replicas send single calls
// only, since the batch routes are newer than 1.0.0.
//
// Its negative control is the same upgrade whose new release brings one
// migration more, one that drops a column the previous release reads (a
// contract step taken while that release still serves): the checks must
// catch it.

// allowedStatuses are the only statuses an answer of an upgrade run may
// have: a 400, 404 or 500 is an instance of one release refusing, or
// failing on, what the other wrote or what a client sent.
var allowedStatuses = []int{200, 409, 429, 503}

// gateProbeJob is the job of the probes of the gated rule: not one of the
// workload's.
const gateProbeJob = "gate-probe"

// gateReadEvery is how often an instance reads the level the database is
// finalized at; gateWait bounds the wait for both instances to have read
// it after finalize.
const (
	gateReadEvery = 10 * time.Second
	gateWait      = 3 * gateReadEvery
)

// upgradeShutdown bounds an instance's clean shutdown (its
// LEASEAPI_SHUTDOWN_TIMEOUT is 5 s).
const upgradeShutdown = 15 * time.Second

// release is a line of RELEASES: a version and the commit it was cut from.
type release struct {
	version, commit, commitTime string
}

// previousRelease reads the newest release of RELEASES in root.
func previousRelease(root string) (release, error) {
	b, err := os.ReadFile(filepath.Join(root, "RELEASES"))
	if err != nil {
		return release{}, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) < 3 {
			return release{}, fmt.Errorf("RELEASES: %q is not a version, a commit and its time", line)
		}
		return release{version: f[0], commit: f[1], commitTime: f[2]}, nil
	}
	return release{}, errors.New("RELEASES names no release")
}

// repoRelease is the repository's root and its previous release.
func repoRelease(t *testing.T) (string, release) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := previousRelease(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, rel
}

// haveCommit returns nil when the git repository at root has rel's
// commit, else the one line that says it does not and what to do.
func haveCommit(root string, rel release) error {
	if err := exec.Command("git", "-C", root, "cat-file", "-e", rel.commit+"^{commit}").Run(); err != nil {
		return fmt.Errorf("the previous release %s was cut from commit %s (RELEASES), which this clone does not have: a shallow clone? fetch the history (git fetch --unshallow) and run again",
			rel.version, rel.commit)
	}
	return nil
}

// buildRelease builds rel's leaseapi from its commit in the repository at
// root, as `make release` would (static, -trimpath, the version stamped:
// 1.0.0 predates internal/version, and the linker ignores the stamp), from
// a copy of that commit's tree (git archive): the module proxy serves its
// dependencies.
func buildRelease(t *testing.T, root string, rel release) string {
	t.Helper()
	if err := haveCommit(root, rel); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	src, err := os.MkdirTemp("", "leaseapi-"+rel.version+"-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(src)
	archive := exec.Command("bash", "-o", "pipefail", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "archive", root, rel.commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rel.commit, err, out)
	}
	out := filepath.Join(binDir, "leaseapi-"+rel.version)
	pkg := "github.com/leaseapi/leaseapi/internal/version"
	ldflags := fmt.Sprintf("-X %s.Version=%s -X %s.Commit=%s -X %s.CommitTime=%s",
		pkg, strings.TrimPrefix(rel.version, "v"), pkg, rel.commit, pkg, rel.commitTime)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/leaseapi")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of leaseapi %s (commit %s): %v\n%s", rel.version, rel.commit, err, b)
	}
	t.Logf("built leaseapi %s from commit %s in %s", rel.version, rel.commit, time.Since(began).Round(100*time.Millisecond))
	return out
}

// dropColumnMigration is the negative control's extra migration: the
// contract step of a column the previous release reads in every lease it
// reads or writes (leases.paused_reason), taken while it still serves.
const dropColumnMigration = `-- +goose Up
-- The negative control of make chaos-upgrade (test/chaos/upgrade_test.go):
-- a column the previous release reads, dropped while it serves.
SET LOCAL lock_timeout = '2s';
ALTER TABLE leases DROP COLUMN paused_reason;
`

// buildWithMigration builds ./cmd/leaseapi with one more Postgres
// migration, numbered after the newest of migrations/postgres, whose text
// is sql: an overlay adds the file to the embedded migrations without
// touching the tree.
func buildWithMigration(t *testing.T, root, name, sql string) string {
	t.Helper()
	dir := filepath.Join(root, "migrations", "postgres")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	newest := 0
	number := regexp.MustCompile(`^(\d+)_.*\.sql$`)
	for _, de := range entries {
		if m := number.FindStringSubmatch(de.Name()); m != nil {
			n, _ := strconv.Atoi(m[1])
			newest = max(newest, n)
		}
	}
	file := fmt.Sprintf("%04d_%s.sql", newest+1, name)
	body := filepath.Join(binDir, file)
	if err := os.WriteFile(body, []byte(sql), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(dir, file): body}})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(binDir, "overlay-"+name+".json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(binDir, "leaseapi-"+name)
	cmd := exec.Command("go", "build", "-overlay", ov, "-o", out, "./cmd/leaseapi")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build with migration %s: %v\n%s", file, err, b)
	}
	t.Logf("built the new release with the extra migration %s", file)
	return out
}

// upgradeConfig is the upgrade tier's run: the PR tier's workload (20 jobs
// every 2 s on 5 replicas, the operator's run now, the zombie, groups,
// policies) on two instances, with the failover tier's webhook (one, of
// every job, on the answering receiver: without faults too few events
// fall due for the two teams' fairness to be judged), and without the
// nemesis: the upgrade's steps are the disruption. Each step is followed
// by a slot of steady load; the warm-up runs on the previous release alone.
func upgradeConfig(seed uint64, prev string) *runConfig {
	cfg := prConfig(seed)
	cfg.Name = "upgrade"
	cfg.Plan = func(*runConfig, *rand.Rand) []event { return nil }
	cfg.HungWebhook, cfg.WebhookTimeout = false, 0
	cfg.Previous, cfg.SingleCalls, cfg.AllowedStatuses = prev, true, allowedStatuses
	cfg.WarmUp = 15 * time.Second
	cfg.Duration = upgradeLength(cfg.WarmUp, upgradeSlot)
	return cfg
}

// upgradeSlot is the steady load after each step of the upgrade; a
// control's is controlSlot.
const (
	upgradeSlot = 10 * time.Second
	controlSlot = 5 * time.Second
)

// upgradeLength is how long the steps take: the warm-up, the migration
// and four replacements each with its slot, finalize and the wait for the
// gate to open (a read period), and a slot after it.
func upgradeLength(warmUp, slot time.Duration) time.Duration {
	return warmUp + 5*slot + gateReadEvery + slot
}

// upgrade is the script of one upgrade run (runConfig.Script).
type upgrade struct {
	prevName, nextName string
	prev               string // the previous release's build; the new one is the env's
	slot               time.Duration
	// rollback is the instance rolled back and forward again.
	rollback int

	// What the script found, read once the run is over (runChaos calls
	// the script on the test's goroutine). migrated is set once the new
	// release's migrations ran; problems are the steps that went wrong;
	// steps are those done, with their times.
	migrated bool
	problems []string
	steps    []string
	// builds are the builds each instance ran, from when.
	builds []ran
}

// ran is the build an instance ran from a time on.
type ran struct {
	inst int
	name string
	from time.Time
}

// buildAt is the build instance inst ran at t.
func (u *upgrade) buildAt(inst int, t time.Time) string {
	name := u.prevName
	for _, b := range u.builds {
		if b.inst == inst && !t.Before(b.from) {
			name = b.name
		}
	}
	return name
}

func (u *upgrade) problem(e *env, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	e.logf("upgrade: %s", s)
	u.problems = append(u.problems, s)
}

func (u *upgrade) note(e *env, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	e.logf("upgrade: %s", s)
	u.steps = append(u.steps, time.Now().Format("15:04:05.000")+" "+s)
}

// answer describes a probe's answer: its status and problem code, or the
// error of no answer.
func answer(status int, code string, err error) string {
	switch {
	case err != nil:
		return "no answer (" + err.Error() + ")"
	case code != "":
		return fmt.Sprintf("%d %s", status, code)
	}
	return strconv.Itoa(status)
}

// run is the upgrade, from the end of the warm-up.
func (u *upgrade) run(e *env) {
	time.Sleep(time.Until(e.start.Add(e.cfg.WarmUp)))
	for _, inst := range e.insts {
		u.note(e, "instance %d runs %s", inst.i, u.prevName)
	}
	u.migrate(e)
	time.Sleep(u.slot)
	for _, inst := range e.insts {
		u.replace(e, inst, e.leaseapiBin, u.prevName, u.nextName)
		time.Sleep(u.slot)
	}
	back := e.insts[u.rollback]
	u.replace(e, back, u.prev, u.nextName, u.prevName)
	time.Sleep(u.slot)
	u.replace(e, back, e.leaseapiBin, u.prevName, u.nextName)
	time.Sleep(u.slot)
	u.gateClosed(e)
	u.registered(e, len(e.insts))
	u.finalize(e)
	u.gateOpens(e)
	time.Sleep(u.slot)
}

// migrate runs the new release's migrations while the previous release
// serves, as docs/upgrading.md tells an operator to (a migration that
// waited past its lock_timeout fails, and is run again), then checks that
// the previous release's instances are still ready on the newer schema.
func (u *upgrade) migrate(e *env) {
	var last string
	for attempt := 1; attempt <= 5; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		began := time.Now()
		cmd := exec.CommandContext(ctx, e.leaseapiBin, "migrate")
		cmd.Env = append(baseEnv(), "LEASEAPI_DATABASE_URL="+e.dsn, "LEASEAPI_LOG_FORMAT=text")
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil {
			u.migrated = true
			u.note(e, "leaseapi migrate of %s ran in %s and applied %s", u.nextName, time.Since(began).Round(time.Millisecond), applied(out))
			break
		}
		last = fmt.Sprintf("%v: %s", err, bytes.TrimSpace(out))
		e.logf("upgrade: leaseapi migrate of %s, attempt %d: %s", u.nextName, attempt, last)
		time.Sleep(time.Second)
	}
	if !u.migrated {
		u.problem(e, "leaseapi migrate of %s failed 5 times while %s served; the last: %s", u.nextName, u.prevName, last)
		return
	}
	for _, inst := range e.insts {
		status, body, err := e.get(inst, "/readyz")
		if status != http.StatusOK {
			u.problem(e, "instance %d (%s) is not ready on the schema of %s: GET /readyz answered %d %s %v",
				inst.i, u.prevName, u.nextName, status, body, err)
		}
	}
}

// appliedFile is the file of a migration in the log of leaseapi migrate.
var appliedFile = regexp.MustCompile(`msg="migration applied" .*file=(\S+)`)

// applied lists the migrations the log of leaseapi migrate says it
// applied.
func applied(log []byte) string {
	var files []string
	for _, m := range appliedFile.FindAllSubmatch(log, -1) {
		files = append(files, string(m[1]))
	}
	if len(files) == 0 {
		return "none (the schema was up to date)"
	}
	return strings.Join(files, ", ")
}

// replace stops inst (SIGTERM, a clean shutdown) and starts bin in its
// place, on the same address and database proxy, and waits until it is
// ready.
func (u *upgrade) replace(e *env, inst *instance, bin, from, to string) {
	inst.mu.Lock()
	p := inst.p
	inst.mu.Unlock()
	began := time.Now()
	if !p.stop(upgradeShutdown) {
		u.problem(e, "instance %d (%s) did not end within %s of its SIGTERM, and was killed", inst.i, from, upgradeShutdown)
	}
	stopped := time.Since(began)
	inst.bin = bin
	u.builds = append(u.builds, ran{inst: inst.i, name: to, from: time.Now()})
	if err := e.startInstance(inst); err != nil {
		u.problem(e, "instance %d: %s did not start in place of %s: %v", inst.i, to, from, err)
		return
	}
	u.note(e, "instance %d runs %s (%s stopped in %s, %s ready %s later)", inst.i, to, from,
		stopped.Round(time.Millisecond), to, (time.Since(began) - stopped).Round(time.Millisecond))
}

// finalize lists the live instances (leaseapi upgrade status) and
// finalizes the upgrade (leaseapi upgrade finalize) with the new release
// and the instances' settings, which must succeed.
func (u *upgrade) finalize(e *env) {
	for _, args := range [][]string{{"upgrade", "status"}, {"upgrade", "finalize"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, e.leaseapiBin, args...)
		cmd.Env = e.insts[0].env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		what := "leaseapi " + strings.Join(args, " ")
		if err != nil {
			u.problem(e, "%s failed with every instance on %s: %v\n%s%s", what, u.nextName, err, out, stderr.Bytes())
			return
		}
		u.note(e, "%s:\n%s", what, bytes.TrimSpace(out))
	}
}

// registered checks that the instance registry holds one record per
// instance: each of the new release records itself, the previous release
// does not, and one that shut down cleanly deleted its record.
func (u *upgrade) registered(e *env, want int) {
	n, err := bounded(5*time.Second, func(ctx context.Context) (int, error) {
		var n int
		err := e.db.QueryRowContext(ctx, `SELECT count(*) FROM instances`).Scan(&n)
		return n, err
	})
	if err != nil || n != want {
		u.problem(e, "the instance registry holds %d records (%v) while %d instances of %s serve: a clean shutdown left its record, or an instance did not record itself",
			n, err, want, u.nextName)
	}
}

// gateClosed checks that before finalize an acquire that asks for the
// gated rule is refused 400 feature_disabled by every instance of the new
// release.
func (u *upgrade) gateClosed(e *env) {
	for _, inst := range e.insts {
		status, code, err := u.gateProbe(e, inst)
		for range 10 {
			if status != 0 && status != http.StatusServiceUnavailable {
				break
			}
			time.Sleep(500 * time.Millisecond)
			status, code, err = u.gateProbe(e, inst)
		}
		if status != http.StatusBadRequest || code != api.CodeFeatureDisabled {
			u.problem(e, "before finalize instance %d (%s) answered an acquire with minIntervalMs %s, not 400 feature_disabled",
				inst.i, u.nextName, answer(status, code, err))
			continue
		}
		u.note(e, "before finalize instance %d refuses minIntervalMs: 400 feature_disabled", inst.i)
	}
}

// gateOpens waits, within gateWait of finalize, until every instance
// decides an acquire that asks for the gated rule (200 or 409): each reads
// the finalized level every gateReadEvery, and until then answers 400
// feature_disabled.
func (u *upgrade) gateOpens(e *env) {
	began := time.Now()
	for _, inst := range e.insts {
		for {
			status, code, err := u.gateProbe(e, inst)
			if status == http.StatusOK || status == http.StatusConflict {
				u.note(e, "instance %d decided an acquire with minIntervalMs %s after finalize: %s",
					inst.i, time.Since(began).Round(100*time.Millisecond), answer(status, code, err))
				break
			}
			waiting := status == 0 || status == http.StatusServiceUnavailable || (status == http.StatusBadRequest && code == api.CodeFeatureDisabled)
			if !waiting {
				u.problem(e, "after finalize instance %d answered an acquire with minIntervalMs %s", inst.i, answer(status, code, err))
				break
			}
			if time.Since(began) > gateWait {
				u.problem(e, "instance %d still answered an acquire with minIntervalMs %s %s after finalize (it reads the finalized level every %s)",
					inst.i, answer(status, code, err), gateWait, gateReadEvery)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// gateProbe sends inst an acquire of gateProbeJob that asks for the gated
// rule, and releases a grant at once. It returns the answer's status (0:
// none) and its problem's code. The probes are not in the history: a 400
// feature_disabled is their expected answer before finalize.
func (u *upgrade) gateProbe(e *env, inst *instance) (int, string, error) {
	status, body, err := e.post(inst, "/leases/"+gateProbeJob+"/acquire", leaseToken,
		map[string]any{"owner": "gate-probe", "ttlMs": 1000, "minIntervalMs": 1000})
	if err != nil {
		return 0, "", err
	}
	if status == http.StatusOK {
		var l api.Lease
		if err := json.Unmarshal(body, &l); err == nil {
			_, _, _ = e.post(inst, "/leases/"+gateProbeJob+"/release", leaseToken,
				map[string]any{"owner": "gate-probe", "token": l.Token})
		}
		return status, "", nil
	}
	var p api.Problem
	_ = json.Unmarshal(body, &p)
	return status, p.Code, nil
}

// post sends one unrecorded call with token to inst.
func (e *env) post(inst *instance, path, token string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d%s", inst.port, path), bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	return e.do(req)
}

// get sends one unrecorded GET to inst.
func (e *env) get(inst *instance, path string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", inst.port, path), nil)
	if err != nil {
		return 0, nil, err
	}
	return e.do(req)
}

func (e *env) do(req *http.Request) (int, []byte, error) {
	resp, err := e.httpc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, b, err
}

// outside is an answer of a run whose status is not one of
// allowedStatuses.
type outside struct {
	what     string
	instance int
	at       time.Time
	status   int
}

// firstOutside reads the history of the run in art and returns its first
// answer whose status is not one of allowedStatuses (ok false for none).
func firstOutside(art string) (outside, bool, error) {
	b, err := os.ReadFile(filepath.Join(art, "history.json"))
	if err != nil {
		return outside{}, false, err
	}
	var h checker.History
	if err := json.Unmarshal(b, &h); err != nil {
		return outside{}, false, err
	}
	var first outside
	found := false
	note := func(status int, ret time.Time, inst int, what string) {
		if status == 0 || ret.IsZero() || slices.Contains(allowedStatuses, status) || (found && !ret.Before(first.at)) {
			return
		}
		first, found = outside{what: what, instance: inst, at: ret, status: status}, true
	}
	for _, o := range h.Ops {
		note(o.Status, o.Return, o.Instance, fmt.Sprintf("%s of %s by %s", o.Kind, o.Job, o.Client))
	}
	for _, c := range h.Triggers {
		note(c.Status, c.Return, c.Instance, fmt.Sprintf("%s of %s by %s", c.Kind, c.Job, c.Client))
	}
	for _, c := range h.Calls {
		note(c.Status, c.Return, c.Instance, fmt.Sprintf("%s by %s", c.Route, c.Client))
	}
	return first, found, nil
}

// newUpgrade is the script of a run with cfg from the previous release
// rel (built at prev) to the build under test.
func newUpgrade(cfg *runConfig, rel release, prev string, slot time.Duration) *upgrade {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x75706772))
	return &upgrade{prevName: rel.version, nextName: "the new release", prev: prev, slot: slot, rollback: rng.IntN(cfg.Instances)}
}

// TestUpgrade is make chaos-upgrade: the rolling upgrade from the previous
// release under the chaos workload, which must keep every invariant, and
// its negative control, which must be caught. CHAOS_SEEDS names the seeds
// (one random seed by default); the control runs with the first.
func TestUpgrade(t *testing.T) {
	root, rel := repoRelease(t)
	prev := buildRelease(t, root, rel)
	seeds, err := parseSeeds("CHAOS_SEEDS", "random")
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
			began := time.Now()
			cfg := upgradeConfig(seed, prev)
			u := newUpgrade(cfg, rel, prev, upgradeSlot)
			cfg.Script = u.run
			r, art := runChaos(t, cfg)
			t.Logf("the upgrade from %s, in %s:\n  %s", rel.version, time.Since(began).Round(time.Second), strings.Join(u.steps, "\n  "))
			failed := false
			if len(u.problems) > 0 {
				failed = true
				t.Errorf("seed %d: the upgrade from %s went wrong; reproduce with CHAOS_SEEDS=%d; artifacts in %s\n  %s",
					seed, rel.version, seed, art, strings.Join(u.problems, "\n  "))
			}
			if r.Failed() {
				failed = true
				var lines []string
				for _, v := range r.Violations {
					lines = append(lines, "  "+v.String())
				}
				if o, ok, _ := firstOutside(art); ok {
					lines = append(lines, fmt.Sprintf("  the first answer outside %v: %d to the %s, from instance %d, then running %s",
						allowedStatuses, o.status, o.what, o.instance, u.buildAt(o.instance, o.at)))
				}
				t.Errorf("seed %d: the upgrade from %s broke invariants; reproduce with CHAOS_SEEDS=%d; artifacts in %s\n%s",
					seed, rel.version, seed, art, strings.Join(lines, "\n"))
			}
			if missing := notExercised(cfg, r); missing != "" {
				failed = true
				t.Errorf("seed %d: the workload was not exercised: %s; reproduce with CHAOS_SEEDS=%d; artifacts in %s",
					seed, missing, seed, art)
			}
			if !failed {
				_ = os.RemoveAll(art)
			}
		})
	}
	t.Run("BreakingMigrationControl", func(t *testing.T) {
		began := time.Now()
		cfg := upgradeConfig(seeds[0], prev)
		cfg.Name, cfg.Control = "upgrade-control", true
		cfg.Leaseapi = buildWithMigration(t, root, "chaos_upgrade_control", dropColumnMigration)
		// Like the mutants: the webhooks and policies judge nothing here.
		cfg.Webhook, cfg.HungWebhook, cfg.WebhookTimeout, cfg.PolicyEvery = false, false, 0, 0
		cfg.WarmUp = 10 * time.Second
		cfg.Duration = upgradeLength(cfg.WarmUp, controlSlot)
		u := newUpgrade(cfg, rel, prev, controlSlot)
		u.nextName = "the new release (+ drop leases.paused_reason)"
		cfg.Script = u.run
		r, art := runChaos(t, cfg)
		t.Logf("the control's upgrade from %s, in %s:\n  %s", rel.version, time.Since(began).Round(time.Second), strings.Join(u.steps, "\n  "))
		if !u.migrated {
			t.Errorf("the control was not exercised: its migration never ran (%s); artifacts in %s", strings.Join(u.problems, "; "), art)
			return
		}
		// The new release reads the dropped column too: the control is
		// caught only when an instance of the previous release answered
		// the first refused call.
		var caught []string
		for _, v := range r.Violations {
			if v.Invariant == "I9" {
				caught = append(caught, v.String())
			}
		}
		o, ok, err := firstOutside(art)
		if err != nil {
			t.Fatalf("read the control's history: %v (artifacts in %s)", err, art)
		}
		if len(caught) == 0 || !ok || u.buildAt(o.instance, o.at) != rel.version {
			first := "none"
			if ok {
				first = fmt.Sprintf("%d to the %s, from instance %d, then running %s", o.status, o.what, o.instance, u.buildAt(o.instance, o.at))
			}
			t.Errorf("a migration that drops a column %s reads was not caught by I9 on an instance of %s (the first answer outside %v: %s; %s); artifacts in %s",
				rel.version, rel.version, allowedStatuses, first, r.SummaryLine(), art)
			return
		}
		t.Logf("caught, as it must be, by %v; the first answer outside %v: %d to the %s, from instance %d, then running %s:\n  %s",
			r.Counts, allowedStatuses, o.status, o.what, o.instance, rel.version, strings.Join(caught, "\n  "))
		if len(u.problems) > 0 {
			t.Logf("the control's steps also went wrong:\n  %s", strings.Join(u.problems, "\n  "))
		}
		_ = os.RemoveAll(art)
	})
}

// TestUpgradeRefusesAShallowClone: a clone without the previous release's
// commit cannot build it, and says so in one line.
func TestUpgradeRefusesAShallowClone(t *testing.T) {
	root, rel := repoRelease(t)
	clone := t.TempDir()
	if out, err := exec.Command("git", "clone", "--quiet", "--depth", "1", "file://"+root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone --depth 1: %v\n%s", err, out)
	}
	head, err := exec.Command("git", "-C", clone, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(head)) == rel.commit {
		t.Skipf("HEAD is the previous release's commit %s: a shallow clone has it", rel.commit)
	}
	err = haveCommit(clone, rel)
	if err == nil {
		t.Fatalf("a clone of depth 1 has the previous release's commit %s", rel.commit)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, rel.commit) || !strings.Contains(msg, "git fetch --unshallow") {
		t.Errorf("the refusal is not one line naming the commit and the remedy: %q", msg)
	}
	if err := haveCommit(root, rel); err != nil {
		t.Errorf("this repository: %v", err)
	}
}
