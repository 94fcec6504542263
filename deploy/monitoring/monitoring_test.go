package monitoring

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestQueriesParse(t *testing.T) {
	t.Parallel()
	queries, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) == 0 {
		t.Fatal("no PromQL found in the rules and the dashboard")
	}
	for _, q := range queries {
		names, err := MetricNames(q.Expr)
		if err != nil {
			t.Errorf("%s: %v\n%s", q.Where, err, q.Expr)
			continue
		}
		if len(names) == 0 || slices.Contains(names, "") {
			t.Errorf("%s: a selector without a metric name: %s", q.Where, q.Expr)
		}
	}
}

func TestMetricNamesCatchesTypos(t *testing.T) {
	t.Parallel()
	names, err := MetricNames(`sum(rate(leaseapi_http_requests_total{code="503"}[5m])) / on() group_left {__name__="up"}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"leaseapi_http_requests_total", "up"}; !slices.Equal(names, want) {
		t.Errorf("MetricNames = %q, want %q", names, want)
	}
	if _, err := MetricNames(`sum(rate(leaseapi_http_requests_total[5m])`); err == nil {
		t.Error("MetricNames accepted an unbalanced parenthesis")
	}
}

func TestRulesTellWhatToDo(t *testing.T) {
	t.Parallel()
	rules, err := LoadRules()
	if err != nil {
		t.Fatal(err)
	}
	if len(rules.Groups) != 1 || rules.Groups[0].Name != "leaseapi" {
		t.Fatalf("want one rule group named leaseapi, got %d groups", len(rules.Groups))
	}
	seen := map[string]bool{}
	for _, r := range rules.Groups[0].Rules {
		if r.Alert == "" || seen[r.Alert] {
			t.Errorf("rule %q: every rule is an alert with a name of its own", r.Alert)
		}
		seen[r.Alert] = true
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
	}
}

// TestEveryAlertIsTestedBothWays reads leaseapi-rules.test.yaml: every alert
// has a case where it must fire and one where it must stay silent.
func TestEveryAlertIsTestedBothWays(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("leaseapi-rules.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	rules, err := LoadRules()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] {
				t.Errorf("%s: no test where it fires", r.Alert)
			}
			if !silent[r.Alert] {
				t.Errorf("%s: no test where it stays silent", r.Alert)
			}
		}
	}
}

func TestDashboard(t *testing.T) {
	t.Parallel()
	d, err := LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	// 41 is the schema Grafana 12 writes; older Grafanas migrate from less.
	if d.SchemaVersion < 39 {
		t.Errorf("schemaVersion %d, want a current one (39 or later)", d.SchemaVersion)
	}
	var variable string
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			variable = "${" + v.Name + "}"
		}
	}
	if variable == "" {
		t.Fatal("no datasource variable of type prometheus")
	}
	var titles []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if p.Datasource == nil || p.Datasource.UID != variable {
			t.Errorf("panel %q: datasource is not %s", p.Title, variable)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no query", p.Title)
		}
	}
	for _, want := range []string{"Ticks missed", "Overdue jobs", "Lease expirations", "Runs finished by outcome",
		"Run duration p50 / p95", "Tick start delay", "Leases by state", "Paused jobs", "Requests by code",
		"5xx and 503 rate", "Store latency p99 per operation"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q", want)
		}
	}
}

// TestPromtool checks the rules and runs their unit tests with Prometheus'
// own tool.
func TestPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := Tool("promtool")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check", "rules", "leaseapi-rules.yaml"},
		{"test", "rules", "leaseapi-rules.test.yaml"},
	} {
		var out bytes.Buffer
		cmd := exec.Command(promtool, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}
}

// TestAlertmanagerExample: amtool accepts the example, and its routes send
// a job's alert to the receiver of the job's team and the rest to the
// platform's.
func TestAlertmanagerExample(t *testing.T) {
	t.Parallel()
	amtool, err := Tool("amtool")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	check := exec.Command(amtool, "check-config", "alertmanager.example.yml")
	check.Stdout, check.Stderr = &out, &out
	if err := check.Run(); err != nil {
		t.Fatalf("amtool check-config: %v\n%s", err, out.String())
	}
	for labels, want := range map[string]string{
		`alertname=LeaseapiJobOverdue job_id=billing:invoices team=billing:`: "billing",
		`alertname=LeaseapiJobFailing job_id=ops.backup team=ops.`:           "ops",
		`alertname=LeaseapiJobOverdue job_id=report team=`:                   "platform",
		`alertname=LeaseapiDown`:                                             "platform",
	} {
		args := append([]string{"config", "routes", "test", "--config.file=alertmanager.example.yml"}, strings.Fields(labels)...)
		var stderr bytes.Buffer
		cmd := exec.Command(amtool, args...)
		cmd.Stderr = &stderr // a warning that --config.file overrides --alertmanager.url
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("amtool %s: %v\n%s%s", strings.Join(args, " "), err, got, stderr.String())
		}
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("an alert with %s goes to %q, want %q", labels, strings.TrimSpace(string(got)), want)
		}
	}
	// The test's copy replaces every receiver's URL.
	cfg, err := AlertmanagerExample(map[string]string{"platform": "http://127.0.0.1:1/p", "billing": "http://127.0.0.1:1/b", "ops": "http://127.0.0.1:1/o"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cfg, []byte("http://127.0.0.1:1/b")) || bytes.Contains(cfg, []byte(".example/")) {
		t.Errorf("AlertmanagerExample did not replace the URLs:\n%s", cfg)
	}
	if _, err := AlertmanagerExample(map[string]string{"billing": "http://127.0.0.1:1/b"}); err == nil {
		t.Error("AlertmanagerExample without a URL for every receiver: no error")
	}
}
