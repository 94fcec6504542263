// Package monitoring holds leaseapi's Prometheus alerting rules
// (leaseapi-rules.yaml, with promtool unit tests in
// leaseapi-rules.test.yaml) and its Grafana dashboard
// (leaseapi-dashboard.json), an Alertmanager configuration that routes the
// per-job alerts by team (alertmanager.example.yml), and reads the PromQL
// out of them so that tests
// can hold every query to the metrics leaseapi exports. No program imports
// it; only tests do.
package monitoring

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

var (
	//go:embed leaseapi-rules.yaml
	rulesYAML []byte
	//go:embed leaseapi-dashboard.json
	dashboardJSON []byte
	//go:embed alertmanager.example.yml
	alertmanagerYAML []byte
)

// AlertmanagerExample returns alertmanager.example.yml with the URL of
// each receiver's webhook replaced by urls[receiver name]; a receiver
// urls does not name is an error, so that a test routes every alert to a
// receiver of its own.
func AlertmanagerExample(urls map[string]string) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(alertmanagerYAML, &cfg); err != nil {
		return nil, fmt.Errorf("alertmanager.example.yml: %w", err)
	}
	receivers, _ := cfg["receivers"].([]any)
	for _, r := range receivers {
		receiver, _ := r.(map[string]any)
		name, _ := receiver["name"].(string)
		url, ok := urls[name]
		if !ok {
			return nil, fmt.Errorf("alertmanager.example.yml: no URL given for receiver %q", name)
		}
		hooks, _ := receiver["webhook_configs"].([]any)
		for _, h := range hooks {
			if hook, ok := h.(map[string]any); ok {
				hook["url"] = url
			}
		}
	}
	return yaml.Marshal(cfg)
}

// Query is one PromQL expression and where it is written.
type Query struct {
	Where string // "alert LeaseapiTickMissed", "panel \"Ticks missed\" target A"
	Expr  string
}

// Rules is the decoded leaseapi-rules.yaml, as much of it as the tests read.
type Rules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []Rule `yaml:"rules"`
	} `yaml:"groups"`
}

// Rule is one alerting rule.
type Rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// Dashboard is the decoded leaseapi-dashboard.json, as much of it as the
// tests read.
type Dashboard struct {
	SchemaVersion int `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []Panel `json:"panels"`
}

// Panel is one dashboard panel.
type Panel struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// LoadRules decodes the embedded rules.
func LoadRules() (Rules, error) {
	var r Rules
	if err := yaml.Unmarshal(rulesYAML, &r); err != nil {
		return r, fmt.Errorf("leaseapi-rules.yaml: %w", err)
	}
	return r, nil
}

// LoadDashboard decodes the embedded dashboard.
func LoadDashboard() (Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return d, fmt.Errorf("leaseapi-dashboard.json: %w", err)
	}
	return d, nil
}

// grafanaVariables are the Grafana variables the dashboard's queries use,
// with the values that make them PromQL: Grafana substitutes them before a
// query reaches Prometheus.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// Queries returns every PromQL expression of the rules and the dashboard,
// with the dashboard's Grafana variables substituted.
func Queries() ([]Query, error) {
	rules, err := LoadRules()
	if err != nil {
		return nil, err
	}
	dash, err := LoadDashboard()
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, Query{Where: "alert " + r.Alert, Expr: r.Expr})
		}
	}
	for _, p := range dash.Panels {
		for _, t := range p.Targets {
			out = append(out, Query{
				Where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID),
				Expr:  grafanaVariables.Replace(t.Expr),
			})
		}
	}
	return out, nil
}

// promql parses stable PromQL only, as a Prometheus started without feature
// flags does.
var promql = parser.NewParser(parser.Options{})

// MetricNames parses expr with Prometheus' own parser and returns the metric
// names its selectors read, in order of appearance.
func MetricNames(expr string) ([]string, error) {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			name := vs.Name
			if name == "" {
				for _, m := range vs.LabelMatchers {
					if m.Name == "__name__" {
						name = m.Value
					}
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// Tool returns the path of a Prometheus tool (promtool, prometheus,
// prometheus-alertmanager, amtool) on PATH, or an error that says how to
// install it: the tests that need one fail with it rather than skip.
func Tool(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not on PATH: run scripts/ensure-packages.sh promtool:prometheus prometheus:prometheus prometheus-alertmanager:prometheus-alertmanager amtool:prometheus-alertmanager (make test does)", name)
	}
	return path, nil
}
