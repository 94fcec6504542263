// Package test renders the chart deploy/helm/leaseapi with Helm's own
// engine, for the defaults and for every ci/*-values.yaml, and decodes every
// object strictly (an unknown or misplaced field fails) into the Kubernetes
// API types and the Prometheus Operator's. It is a module of its own so that
// leaseapi's go.mod does not take Helm's and Kubernetes' dependencies; the
// same go.mod pins the helm command that make lint runs (go tool helm).
package test

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "../leaseapi"
	release   = "leaseapi"
	namespace = "platform"
)

// rendered is what one install renders: the objects, decoded, by
// "Kind/name", and NOTES.txt.
type rendered struct {
	objects map[string]any
	raw     map[string]map[string]any // the same objects as plain maps
	notes   string
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load %s: %v", chartDir, err)
	}
	return c
}

// readValues reads a values file.
func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	vals, err := chartutil.ReadValuesFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return vals
}

// render renders the chart with vals as helm install does: the values are
// merged with values.yaml and checked against values.schema.json first.
func render(c *chart.Chart, vals map[string]any) (map[string]string, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}
	top, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, err
	}
	return engine.Render(c, top)
}

// newObject returns the typed object of a kind the chart may render.
func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, true
	case "v1 Service":
		return &corev1.Service{}, true
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "networking.k8s.io/v1 Ingress":
		return &networkingv1.Ingress{}, true
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, true
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &monitoringv1.PrometheusRule{}, true
	}
	return nil, false
}

// decode decodes the rendered files strictly.
func decode(t *testing.T, files map[string]string) rendered {
	t.Helper()
	out := rendered{objects: map[string]any{}, raw: map[string]map[string]any{}}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			out.notes = files[name]
			continue
		}
		for _, doc := range splitDocuments(t, name, files[name]) {
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name      string            `json:"name"`
					Namespace string            `json:"namespace"`
					Labels    map[string]string `json:"labels"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			obj, ok := newObject(head.APIVersion, head.Kind)
			if !ok {
				t.Fatalf("%s: %s %s is not a kind this test knows; add its Go type", name, head.APIVersion, head.Kind)
			}
			if err := decodeStrict(doc, obj); err != nil {
				t.Errorf("%s: %s %s does not decode strictly: %v", name, head.Kind, head.Metadata.Name, err)
			}
			for k, v := range head.Metadata.Labels {
				for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
					t.Errorf("%s: %s label %s=%q: %s", name, head.Kind, k, v, msg)
				}
			}
			if head.Metadata.Namespace != "" {
				t.Errorf("%s: %s sets metadata.namespace; the release's namespace applies", name, head.Kind)
			}
			key := head.Kind + "/" + head.Metadata.Name
			if _, dup := out.objects[key]; dup {
				t.Errorf("%s: %s rendered twice", name, key)
			}
			var m map[string]any
			if err := yaml.Unmarshal(doc, &m); err != nil {
				t.Fatal(err)
			}
			out.objects[key], out.raw[key] = obj, m
		}
	}
	return out
}

// decodeStrict decodes a YAML document into obj as the API server does,
// and fails where the API server would drop something: an unknown field, a
// field spelled in another case (encoding/json would accept
// readOnlyRootFileSystem for readOnlyRootFilesystem), a duplicate key.
func decodeStrict(doc []byte, obj any) error {
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(data, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// splitDocuments splits a YAML stream into its non-empty documents.
func splitDocuments(t *testing.T, name, text string) [][]byte {
	t.Helper()
	r := yamlutil.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var v any
		if err := yaml.Unmarshal(doc, &v); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, doc)
		}
		if v != nil {
			docs = append(docs, doc)
		}
	}
}

// ciValues are the value files make lint renders: the defaults (with the
// three required values) and one per toggle.
func ciValues(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s/ci/*-values.yaml: %v", chartDir, err)
	}
	return files
}

// renderFile renders the chart with a values file.
func renderFile(t *testing.T, c *chart.Chart, path string) rendered {
	t.Helper()
	files, err := render(c, readValues(t, path))
	if err != nil {
		t.Fatalf("render with %s: %v", path, err)
	}
	return decode(t, files)
}

// TestEveryToggleDecodesStrictly renders every ci values file and checks
// what a reviewer of the chart checks first.
func TestEveryToggleDecodesStrictly(t *testing.T) {
	t.Parallel()
	c := loadChart(t)
	for _, path := range ciValues(t) {
		t.Run(strings.TrimSuffix(filepath.Base(path), "-values.yaml"), func(t *testing.T) {
			t.Parallel()
			r := renderFile(t, c, path)
			checkDeployment(t, r, readValues(t, path))
			if !strings.Contains(r.notes, "leaseapi credentials create --name platform --role admin --scope '*'") {
				t.Errorf("NOTES.txt does not tell how to create the first admin credential:\n%s", r.notes)
			}
		})
	}
}

func deployment(t *testing.T, r rendered) *appsv1.Deployment {
	t.Helper()
	d, ok := r.objects["Deployment/"+release].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("no Deployment/%s among %v", release, keys(r.objects))
	}
	return d
}

// checkDeployment checks the secure defaults, the probes and the database
// URL, which no value may turn off.
func checkDeployment(t *testing.T, r rendered, vals map[string]any) {
	t.Helper()
	d := deployment(t, r)
	pod := d.Spec.Template.Spec
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token; leaseapi calls no Kubernetes API")
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("the pod does not set runAsNonRoot")
	}
	if len(pod.TopologySpreadConstraints) == 0 || !matches(pod.TopologySpreadConstraints[0].LabelSelector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("topology spread %+v does not select the pods", pod.TopologySpreadConstraints)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if sc := ctr.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("the container's root filesystem is writable or it may escalate privileges")
	}
	if _, ok := ctr.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Error("no memory limit: leaseapi's Go memory limit is derived from it")
	}
	if ctr.Resources.Requests.Memory().IsZero() || ctr.Resources.Requests.Cpu().IsZero() {
		t.Error("no cpu and memory requests")
	}
	for name, p := range map[string]struct {
		probe *corev1.Probe
		path  string
	}{"startup": {ctr.StartupProbe, "/healthz"}, "liveness": {ctr.LivenessProbe, "/healthz"}, "readiness": {ctr.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s probe %+v, want GET %s", name, p.probe, p.path)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range ctr.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("env %s set twice", e.Name)
		}
		env[e.Name] = e
		if strings.Contains(e.Value, "://") && strings.Contains(e.Value, "@") {
			t.Errorf("env %s carries credentials in plain text", e.Name)
		}
	}
	db := env["LEASEAPI_DATABASE_URL"]
	if db.Value != "" || db.ValueFrom == nil || db.ValueFrom.SecretKeyRef == nil || db.ValueFrom.SecretKeyRef.Name != lookup(vals, "database", "existingSecret") {
		t.Errorf("LEASEAPI_DATABASE_URL = %+v, want it from Secret %v", db, lookup(vals, "database", "existingSecret"))
	}

	if pdb, ok := r.objects["PodDisruptionBudget/"+release].(*policyv1.PodDisruptionBudget); ok {
		if !matches(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("PodDisruptionBudget selector %v does not select the pods", pdb.Spec.Selector.MatchLabels)
		}
	} else if lookup(vals, "podDisruptionBudget", "enabled") != false {
		t.Error("no PodDisruptionBudget")
	}
	svc, ok := r.objects["Service/"+release].(*corev1.Service)
	if !ok || !matches(svc.Spec.Selector, d.Spec.Template.Labels) {
		t.Fatalf("no Service selecting the pods")
	}
	// The ServiceMonitor's job label comes from the Service's
	// app.kubernetes.io/name; the alerts select job="leaseapi".
	if sm, ok := r.objects["ServiceMonitor/"+release].(*monitoringv1.ServiceMonitor); ok {
		if got := svc.Labels[sm.Spec.JobLabel]; got != "leaseapi" {
			t.Errorf("ServiceMonitor jobLabel %q gives job=%q, want leaseapi", sm.Spec.JobLabel, got)
		}
		if !matches(sm.Spec.Selector.MatchLabels, svc.Labels) || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name {
			t.Errorf("ServiceMonitor %+v does not select the Service's port %s", sm.Spec, svc.Spec.Ports[0].Name)
		}
	}
	if lookup(vals, "tls", "enabled") == true {
		checkTLS(t, r, d)
	}
	// A highly available database is one leaseapi acknowledges writes on
	// only once its standby has them.
	wantDurability := ""
	if lookup(vals, "database", "highAvailability") == true {
		wantDurability = "replicated"
	}
	if got := env["LEASEAPI_DURABILITY"].Value; got != wantDurability {
		t.Errorf("LEASEAPI_DURABILITY = %q, want %q (database.highAvailability %v)", got, wantDurability, lookup(vals, "database", "highAvailability"))
	}
}

// checkTLS: the whole Secret is mounted (a subPath mount never sees a
// renewal), the variables name its files, and the probes and the scrape
// speak https.
func checkTLS(t *testing.T, r rendered, d *appsv1.Deployment) {
	t.Helper()
	ctr := d.Spec.Template.Spec.Containers[0]
	var mount *corev1.VolumeMount
	for i := range ctr.VolumeMounts {
		if ctr.VolumeMounts[i].Name == "tls" {
			mount = &ctr.VolumeMounts[i]
		}
	}
	if mount == nil || mount.SubPath != "" || !mount.ReadOnly {
		t.Fatalf("TLS Secret mount %+v, want the whole Secret, read-only", mount)
	}
	for _, e := range ctr.Env {
		if (e.Name == "LEASEAPI_TLS_CERT_FILE" || e.Name == "LEASEAPI_TLS_KEY_FILE") && filepath.Dir(e.Value) != mount.MountPath {
			t.Errorf("%s = %s, not in the mount %s", e.Name, e.Value, mount.MountPath)
		}
	}
	if ctr.ReadinessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Errorf("readiness probe scheme %s, want HTTPS", ctr.ReadinessProbe.HTTPGet.Scheme)
	}
	if sm, ok := r.objects["ServiceMonitor/"+release].(*monitoringv1.ServiceMonitor); ok {
		if s := sm.Spec.Endpoints[0].Scheme; s == nil || *s != "https" {
			t.Errorf("ServiceMonitor scheme %v, want https", s)
		}
	}
}

// TestPrometheusRuleIsDeployMonitoring: the PrometheusRule's groups are
// deploy/monitoring/leaseapi-rules.yaml's, rule for rule.
func TestPrometheusRuleIsDeployMonitoring(t *testing.T) {
	t.Parallel()
	r := renderFile(t, loadChart(t), filepath.Join(chartDir, "ci", "monitoring-values.yaml"))
	rule, ok := r.objects["PrometheusRule/"+release].(*monitoringv1.PrometheusRule)
	if !ok {
		t.Fatalf("no PrometheusRule/%s among %v", release, keys(r.objects))
	}
	data, err := os.ReadFile("../../monitoring/leaseapi-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := decodeStrict(data, &want); err != nil {
		t.Fatalf("deploy/monitoring/leaseapi-rules.yaml: %v", err)
	}
	if len(want.Groups) == 0 || !reflect.DeepEqual(rule.Spec, want) {
		t.Errorf("the chart's PrometheusRule differs from deploy/monitoring/leaseapi-rules.yaml; run make manifests")
	}
}

// TestSchemaRefuses: what a wrong value does at install time.
func TestSchemaRefuses(t *testing.T) {
	t.Parallel()
	c := loadChart(t)
	tests := []struct {
		name string
		set  func(v map[string]any)
		want string
	}{
		{"WrongType", func(v map[string]any) { v["replicaCount"] = "two" }, "replicaCount"},
		{"UnknownKey", func(v map[string]any) { v["replicas"] = 3 }, "replicas"},
		{"UnknownNestedKey", func(v map[string]any) { v["tls"] = map[string]any{"enable": true} }, "enable"},
		{"DatabaseURLInConfig", func(v map[string]any) {
			v["config"] = map[string]any{"LEASEAPI_DATABASE_URL": "postgres://u:p@db/leaseapi"}
		}, "invalid propertyName 'LEASEAPI_DATABASE_URL'"},
		{"NotASetting", func(v map[string]any) { v["config"] = map[string]any{"LOG_LEVEL": "debug"} }, "invalid propertyName 'LOG_LEVEL'"},
		// null deletes a default, as --set resources.limits.memory=null does.
		{"NoMemoryLimit", func(v map[string]any) {
			v["resources"] = map[string]any{"limits": map[string]any{"memory": nil, "cpu": "1"}}
		}, "memory"},
		{"NoImage", func(v map[string]any) { delete(v, "image") }, "image.repository is required"},
		{"NoDatabaseSecret", func(v map[string]any) { delete(v, "database") }, "database.existingSecret is required"},
		{"TLSWithoutSecret", func(v map[string]any) { v["tls"] = map[string]any{"enabled": true} }, "tls.secretName is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vals := readValues(t, filepath.Join(chartDir, "ci", "defaults-values.yaml"))
			tt.set(vals)
			_, err := render(c, vals)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("render = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

// TestKubernetesManifestIsRendered: deploy/kubernetes/leaseapi.yaml is the
// chart rendered with deploy/helm/kubernetes-values.yaml (make manifests).
func TestKubernetesManifestIsRendered(t *testing.T) {
	t.Parallel()
	r := renderFile(t, loadChart(t), "../kubernetes-values.yaml")
	data, err := os.ReadFile("../../kubernetes/leaseapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	committed := decode(t, map[string]string{"leaseapi.yaml": string(data)})
	if !reflect.DeepEqual(committed.raw, r.raw) {
		t.Errorf("deploy/kubernetes/leaseapi.yaml is not the chart rendered with deploy/helm/kubernetes-values.yaml; run make manifests")
	}
}

// matches reports whether a non-empty selector selects podLabels.
func matches(selector, podLabels map[string]string) bool {
	return len(selector) > 0 && labels.SelectorFromSet(selector).Matches(labels.Set(podLabels))
}

// lookup reads a nested value.
func lookup(vals map[string]any, path ...string) any {
	var cur any = vals
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestAppVersionIsTheLatestRelease: the chart's appVersion names the newest
// release recorded in RELEASES (the first word of its first line that is
// not a comment), so that the chart of a release says which release it
// deploys; cutting a release updates both in one commit.
func TestAppVersionIsTheLatestRelease(t *testing.T) {
	b, err := os.ReadFile("../../../RELEASES")
	if err != nil {
		t.Fatal(err)
	}
	var latest string
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			latest = strings.TrimPrefix(f[0], "v")
			break
		}
	}
	if latest == "" {
		t.Fatal("RELEASES names no release")
	}
	if got := loadChart(t).Metadata.AppVersion; got != latest {
		t.Errorf("Chart.yaml appVersion = %q, want %q, the newest release in RELEASES", got, latest)
	}
}
