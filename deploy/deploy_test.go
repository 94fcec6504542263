// Package deploy holds the deployment files (docker compose additions, the
// Helm chart, Kubernetes manifests, the cron replica's Dockerfile).
// kubernetes/leaseapi.yaml is rendered from the chart (make manifests;
// deploy/helm/test fails when it is stale). Its test keeps them consistent
// with the code: probe paths the API serves, selectors that match,
// an autoscaler that targets the cron Deployment, and cron specs and job ids
// the runner accepts. No cluster or Docker engine is needed.
package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/schedule"
)

// object is a decoded Kubernetes object.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec spec `yaml:"spec"`
}

// spec is the union of the spec fields the test reads.
type spec struct {
	Replicas *int `yaml:"replicas"`
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	// Service selectors are a plain map.
	ServiceSelector map[string]string `yaml:"-"`
	Template        struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			Containers []container `yaml:"containers"`
		} `yaml:"spec"`
	} `yaml:"template"`
	MinAvailable   *int `yaml:"minAvailable"`
	ScaleTargetRef struct {
		Kind string `yaml:"kind"`
		Name string `yaml:"name"`
	} `yaml:"scaleTargetRef"`
	MinReplicas int `yaml:"minReplicas"`
	MaxReplicas int `yaml:"maxReplicas"`
}

type container struct {
	Args           []string `yaml:"args"`
	ReadinessProbe *probe   `yaml:"readinessProbe"`
	LivenessProbe  *probe   `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
	} `yaml:"resources"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

func readObjects(t *testing.T) map[string]object {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objects := make(map[string]object)
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var node yaml.Node
			if err := dec.Decode(&node); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var o object
			if err := node.Decode(&o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.Kind == "Service" {
				var svc struct {
					Spec struct {
						Selector map[string]string `yaml:"selector"`
					} `yaml:"spec"`
				}
				if err := node.Decode(&svc); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				o.Spec.ServiceSelector = svc.Spec.Selector
			}
			objects[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	return objects
}

func get(t *testing.T, objects map[string]object, key string) object {
	t.Helper()
	o, ok := objects[key]
	if !ok {
		t.Fatalf("deploy/kubernetes has no %s", key)
	}
	return o
}

// matches reports whether selector selects labels.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestKubernetesLeaseapi(t *testing.T) {
	t.Parallel()
	objects := readObjects(t)
	d := get(t, objects, "Deployment/leaseapi")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("leaseapi Deployment: replicas %v, want 2", d.Spec.Replicas)
	}
	labels := d.Spec.Template.Metadata.Labels
	if !matches(d.Spec.Selector.MatchLabels, labels) {
		t.Errorf("leaseapi Deployment: selector %v does not match its pods %v", d.Spec.Selector.MatchLabels, labels)
	}
	if svc := get(t, objects, "Service/leaseapi"); !matches(svc.Spec.ServiceSelector, labels) {
		t.Errorf("leaseapi Service: selector %v does not match the pods %v", svc.Spec.ServiceSelector, labels)
	}
	pdb := get(t, objects, "PodDisruptionBudget/leaseapi")
	if !matches(pdb.Spec.Selector.MatchLabels, labels) || pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != 1 {
		t.Errorf("leaseapi PodDisruptionBudget: want minAvailable 1 over the leaseapi pods, got %+v", pdb.Spec)
	}

	var paths struct {
		Paths map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(api.Spec, &paths); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	for name, p := range map[string]struct {
		probe *probe
		want  string
	}{"readiness": {c.ReadinessProbe, "/readyz"}, "liveness": {c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet.Path != p.want {
			t.Errorf("leaseapi %s probe: got %+v, want GET %s", name, p.probe, p.want)
			continue
		}
		if _, ok := paths.Paths[p.want]; !ok {
			t.Errorf("leaseapi %s probe: api/openapi.yaml has no %s", name, p.want)
		}
	}
}

func TestKubernetesCron(t *testing.T) {
	t.Parallel()
	objects := readObjects(t)
	d := get(t, objects, "Deployment/cron")
	if d.Spec.Replicas != nil {
		t.Error("cron Deployment sets replicas: re-applying it would reset what the autoscaler chose")
	}
	hpa := get(t, objects, "HorizontalPodAutoscaler/cron")
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != "cron" {
		t.Errorf("HPA targets %+v, want Deployment cron", hpa.Spec.ScaleTargetRef)
	}
	if hpa.Spec.MinReplicas < 2 || hpa.Spec.MaxReplicas <= hpa.Spec.MinReplicas {
		t.Errorf("HPA: min %d max %d, want at least 2 and room to grow", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Resources.Requests["cpu"] == "" {
		t.Error("cron container has no CPU request: the HPA's CPU utilization needs one")
	}
	checkReplicaArgs(t, "deploy/kubernetes/cronreplica.yaml", c.Args)
}

func TestComposeCronReplicas(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Hostname string `yaml:"hostname"`
			// Build is a context path or a map with context and dockerfile.
			Build   any      `yaml:"build"`
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatal(err)
	}
	owners := make(map[string]bool)
	for _, name := range []string{"cronreplica-1", "cronreplica-2", "cronreplica-3"} {
		s, ok := compose.Services[name]
		if !ok {
			t.Fatalf("docker-compose.yml has no service %s", name)
		}
		if owners[s.Hostname] || s.Hostname == "" {
			t.Errorf("%s: hostname %q (the replica's owner) must be set and unique", name, s.Hostname)
		}
		owners[s.Hostname] = true
		build, _ := s.Build.(map[string]any)
		dockerfile, _ := build["dockerfile"].(string)
		if _, err := os.Stat(filepath.Join("..", dockerfile)); dockerfile == "" || err != nil {
			t.Errorf("%s: build.dockerfile %q: want the cron replica's Dockerfile (%v)", name, dockerfile, err)
		}
		checkReplicaArgs(t, "docker-compose.yml "+name, s.Command)
	}
}

// checkReplicaArgs checks the -job flags of a cronreplica command line: valid
// job ids, specs the runner parses, no job twice.
func checkReplicaArgs(t *testing.T, where string, args []string) {
	t.Helper()
	var ids []string
	for _, a := range args {
		v, ok := strings.CutPrefix(a, "-job=")
		if !ok {
			continue
		}
		id, spec, _ := strings.Cut(v, "=")
		if !leaseapi.ValidJobID(id) || slices.Contains(ids, id) {
			t.Errorf("%s: job id %q invalid or repeated", where, id)
		}
		ids = append(ids, id)
		if _, err := schedule.Parse(spec); err != nil {
			t.Errorf("%s: %v", where, err)
		}
	}
	if len(ids) == 0 {
		t.Errorf("%s: no -job=NAME=SPEC arguments", where)
	}
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("kubernetes/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("kubernetes/*.yaml")
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" && !slices.Contains(k.Resources, name) {
			t.Errorf("kustomization.yaml does not list %s", name)
		}
	}
}

// TestDockerfileShipsLeasectl: the service image builds leaseapi and
// leasectl, packages that exist, and copies both into /usr/local/bin, so
// that a job image can take leasectl with COPY --from.
func TestDockerfileShipsLeasectl(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	built := make(map[string]bool)  // binary name → built into /out
	copied := make(map[string]bool) // path in the final image
	// Instructions, a line continued with a trailing backslash joined to
	// the next.
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		switch {
		case len(f) > 3 && f[0] == "RUN" && slices.Contains(f, "build") && slices.Contains(f, "/out/"):
			for _, arg := range f {
				if pkg, ok := strings.CutPrefix(arg, "./cmd/"); ok {
					if _, err := os.Stat(filepath.Join("..", "cmd", pkg)); err != nil {
						t.Errorf("Dockerfile builds ./cmd/%s: %v", pkg, err)
					}
					built[pkg] = true
				}
			}
		case len(f) == 4 && f[0] == "COPY" && f[1] == "--from=build":
			if bin, ok := strings.CutPrefix(f[2], "/out/"); ok && built[bin] {
				copied[f[3]] = true
			}
		}
	}
	for _, bin := range []string{"leaseapi", "leasectl"} {
		if !copied["/usr/local/bin/"+bin] {
			t.Errorf("Dockerfile: want %s built into /out/ and copied to /usr/local/bin/%s", bin, bin)
		}
	}
}

// TestChartRulesAreDeployMonitoring: the chart's PrometheusRule is made from
// its copy of monitoring/leaseapi-rules.yaml, since Helm reads no file
// outside the chart. make manifests copies it; the two must not differ.
func TestChartRulesAreDeployMonitoring(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile("monitoring/leaseapi-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("helm/leaseapi/files/leaseapi-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("deploy/helm/leaseapi/files/leaseapi-rules.yaml differs from deploy/monitoring/leaseapi-rules.yaml; run make manifests")
	}
}

// TestChartNeverOpensTheAPI: the chart, its values and the manifests
// rendered from it never set LEASEAPI_OPEN, so an open API in a cluster
// answers only loopback peers until its first credential exists
// (docs/security.md); docker-compose.yml sets it for its replicas.
func TestChartNeverOpensTheAPI(t *testing.T) {
	t.Parallel()
	for _, root := range []string{"helm", "kubernetes"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if bytes.Contains(data, []byte("LEASEAPI_OPEN")) {
				t.Errorf("%s sets LEASEAPI_OPEN; the chart never opens the API to every peer", path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	compose, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(compose, []byte(`LEASEAPI_OPEN: "true"`)) {
		t.Errorf("docker-compose.yml does not set LEASEAPI_OPEN for leaseapi, whose replicas reach it from other containers")
	}
}
