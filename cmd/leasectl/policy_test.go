package main

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestPolicyFlagsBody(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // the body's JSON, or the usage error's text
	}{
		{[]string{"--consecutive-failures", "3"}, `{"consecutiveFailures":3}`},
		{[]string{"--failure-rate", "0.25", "--failure-runs", "8", "--max-runtime", "90m", "--min-runtime", "1500ms",
			"--missed-ticks", "2", "--recovery-threshold", "3", "--realert-after", "4h"},
			`{"failureRate":{"runs":8,"threshold":0.25},"maxRuntimeMs":5400000,"minRuntimeMs":1500,"missedTicks":2,"realertAfterMs":14400000,"recoveryThreshold":3}`},
		{nil, "want at least one condition"},
		{[]string{"--realert-after", "1h"}, "want at least one condition"},
		{[]string{"--failure-runs", "8"}, "--failure-rate and --failure-runs go together"},
		{[]string{"--failure-rate", "1.5", "--failure-runs", "8"}, "--failure-rate: must be a number greater than 0 and at most 1"},
		{[]string{"--failure-rate", "0.5", "--failure-runs", "65"}, "--failure-runs: must be an integer from 1 to 64"},
		{[]string{"--consecutive-failures", "-1"}, "--consecutive-failures: must be an integer from 1 to 100"},
		{[]string{"--max-runtime", "1500us"}, "--max-runtime: must be a whole number of milliseconds"},
		{[]string{"--max-runtime", "169h"}, "--max-runtime: must be a whole number of milliseconds from 1 to 604800000"},
		{[]string{"--missed-ticks", "1", "--realert-after", "30s"}, "--realert-after: must be a whole number of milliseconds from 60000"},
	} {
		fs := newFlagSet("policy put", io.Discard)
		var p policyFlags
		p.add(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		body, err := p.body()
		if err != nil {
			if _, ok := errors.AsType[usageError](err); !ok || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%q: error %v; want a usage error with %q", c.args, err, c.want)
			}
			continue
		}
		b, _ := json.Marshal(body)
		if string(b) != c.want {
			t.Errorf("%q: body %s; want %s", c.args, b, c.want)
		}
	}
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	job := "policy-job"
	run := func(tick, command string) {
		t.Helper()
		if code, _, stderr := leasectl(t, userToken, "run", "--tick", tick, job, "--", command); (code != 0) != (command == "false") {
			t.Fatalf("run %s for %s: exit %d, %q", command, tick, code, stderr)
		}
	}
	run("2026-11-30T07:00:00Z", "true")

	for _, c := range []struct {
		name  string
		token string
		args  []string
		code  int
		want  string
	}{
		{"by a user", userToken, []string{"--consecutive-failures", "2", job}, 77, "403"},
		{"no condition", adminToken, []string{"--recovery-threshold", "2", job}, 64, "want at least one condition"},
		{"a rate without its runs", adminToken, []string{"--failure-rate", "0.5", job}, 64, "--failure-rate and --failure-runs go together"},
		{"min not below max", adminToken, []string{"--max-runtime", "1m", "--min-runtime", "1m", job}, 64, "--min-runtime: must be less than maxRuntimeMs"},
		{"a count out of bounds", adminToken, []string{"--missed-ticks", "101", job}, 64, "--missed-ticks: must be an integer from 1 to 100"},
		{"an unknown job", adminToken, []string{"--consecutive-failures", "2", job + ".never"}, 1, "not_found"},
	} {
		code, _, stderr := leasectl(t, c.token, append([]string{"policy", "put"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("policy put %s: exit %d, %q; want %d and %q", c.name, code, stderr, c.code, c.want)
		}
	}

	code, stdout, stderr := leasectl(t, adminToken, "policy", "put", "--consecutive-failures", "2",
		"--failure-rate", "0.5", "--failure-runs", "10", "--max-runtime", "2h", "--realert-after", "1h", job)
	if code != 0 {
		t.Fatalf("policy put: exit %d, %q", code, stderr)
	}
	for _, want := range []string{"STATUS                ok\n", "CONSECUTIVE FAILURES  2\n", "FAILURE RATE          0.5 of the newest 10 runs\n",
		"MAX RUNTIME           2h0m0s\n", "RECOVERY THRESHOLD    1\n", "REALERT AFTER         1h0m0s\n", "by admin-token-1\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("policy put printed %q; want %q in it", stdout, want)
		}
	}
	if strings.Contains(stdout, "MIN RUNTIME") || strings.Contains(stdout, "LAST ALERT") {
		t.Errorf("policy put printed %q; want no line of what is not set", stdout)
	}

	run("2026-12-01T07:00:00Z", "false")
	run("2026-12-02T07:00:00Z", "false")
	if code, stdout, stderr := leasectl(t, userToken, "policy", "get", job); code != 0 ||
		!strings.Contains(stdout, "STATUS                alerting: failures\n") || !strings.Contains(stdout, "LAST ALERT") {
		t.Errorf("policy get after two failures: exit %d, %q %q; want alerting: failures", code, stdout, stderr)
	}
	if code, stdout, _ := leasectl(t, userToken, "get", job); code != 0 || !strings.Contains(stdout, "ALERTING             failures\n") {
		t.Errorf("get of an alerting job: exit %d, %q; want its reasons", code, stdout)
	}
	if code, stdout, _ := leasectl(t, userToken, "policy", "get", "-o", "json", job); code != 0 ||
		!strings.Contains(stdout, `"status": "alerting"`) || !strings.Contains(stdout, `"consecutiveFailures": 2`) {
		t.Errorf("policy get -o json: exit %d, %q; want the API's JSON", code, stdout)
	}

	run("2026-12-03T07:00:00Z", "true")
	if code, stdout, _ := leasectl(t, userToken, "policy", "get", job); code != 0 || !strings.Contains(stdout, "STATUS                ok\n") {
		t.Errorf("policy get after a success: exit %d, %q; want ok", code, stdout)
	}
	if code, stdout, _ := leasectl(t, userToken, "get", job); code != 0 || strings.Contains(stdout, "ALERTING") {
		t.Errorf("get of a job that is ok: exit %d, %q; want no ALERTING line", code, stdout)
	}

	if code, stdout, stderr := leasectl(t, adminToken, "policy", "delete", job); code != 0 || stdout != "policy of job \"policy-job\" deleted\n" {
		t.Fatalf("policy delete: exit %d, %q %q", code, stdout, stderr)
	}
	if code, _, stderr := leasectl(t, userToken, "policy", "get", job); code != 1 || !strings.Contains(stderr, "policy_not_found") {
		t.Errorf("policy get after delete: exit %d, %q; want 1 and policy_not_found", code, stderr)
	}
	if code, _, stderr := leasectl(t, adminToken, "policy", "delete", job); code != 1 || !strings.Contains(stderr, "policy_not_found") {
		t.Errorf("policy delete without one: exit %d, %q; want 1 and policy_not_found", code, stderr)
	}
	if code, _, stderr := leasectl(t, userToken, "policy", "show", job); code != 64 || !strings.Contains(stderr, "unknown action") {
		t.Errorf("policy show: exit %d, %q; want 64", code, stderr)
	}
}
