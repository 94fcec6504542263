// Package release tests `make release` (scripts/release.sh): two checkouts
// of the same commit, in different directories, give byte-identical
// artifacts, and the binaries carry the version they were stamped with.
package release

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// testVersion is the version the test releases: a pre-release, so that it
// can never be mistaken for a real one.
const testVersion = "1.2.3-test.1"

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// checkout clones the repository into dir, at commit: the release of a
// commit, whatever the repository's working tree holds.
func checkout(t *testing.T, repo, dir, commit string) {
	t.Helper()
	if out, err := exec.Command("git", "clone", "--quiet", "--no-checkout", repo, dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	git(t, dir, "checkout", "--quiet", "--detach", commit)
}

// release runs make release in dir into dist and returns its output.
func release(t *testing.T, dir, version, dist string) (string, error) {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "release", "VERSION="+version, "DIST="+dist)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestReleaseIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds six binaries twice")
	}
	for _, tool := range []string{"git", "make", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: %v", tool, err)
		}
	}
	repo := git(t, ".", "rev-parse", "--show-toplevel")
	commit := git(t, repo, "rev-parse", "HEAD")
	tmp := t.TempDir()
	// Different depths and names, so that a path that leaks into a binary
	// shows as a difference.
	dirs := []string{filepath.Join(tmp, "a"), filepath.Join(tmp, "b", "src", "leaseapi")}
	var sums [][]byte
	for i, dir := range dirs {
		checkout(t, repo, dir, commit)
		dist := filepath.Join(tmp, "dist"+string(rune('A'+i)))
		out, err := release(t, dir, testVersion, dist)
		if err != nil {
			t.Fatalf("make release in %s: %v\n%s", dir, err, out)
		}
		if _, derr := exec.Command("docker", "info").CombinedOutput(); derr != nil &&
			!strings.Contains(out, "no Docker engine answers (docker info failed): skipped the image leaseapi:"+testVersion) {
			t.Errorf("make release without a Docker engine does not say it skipped the image:\n%s", out)
		}
		b, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b)
		if i == 0 {
			checkArtifacts(t, dist, b, commit, git(t, repo, "log", "-1", "--format=%ct", commit))
		}
	}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Errorf("two releases of %s differ:\n%s\n%s", commit, sums[0], sums[1])
	}
}

// checkArtifacts checks one release's SHA256SUMS lists every artifact, and
// what each binary and SBOM says of itself.
func checkArtifacts(t *testing.T, dist string, sums []byte, commit, commitEpoch string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(sums)), "\n")
	if len(lines) != 12 {
		t.Errorf("SHA256SUMS has %d lines, want 12 (3 binaries and their SBOMs for 2 architectures):\n%s", len(lines), sums)
	}
	var epoch int64
	if _, err := fmt.Sscan(commitEpoch, &epoch); err != nil {
		t.Fatal(err)
	}
	commitTime := time.Unix(epoch, 0).UTC().Format(time.RFC3339)
	for _, arch := range []string{"amd64", "arm64"} {
		for _, cmd := range []string{"leaseapi", "leasectl", "cronreplica"} {
			bin := filepath.Join(dist, cmd+"_"+testVersion+"_linux_"+arch)
			info, err := buildinfo.ReadFile(bin)
			if err != nil {
				t.Fatalf("%s: %v", bin, err)
			}
			settings := map[string]string{}
			for _, s := range info.Settings {
				settings[s.Key] = s.Value
			}
			for key, want := range map[string]string{
				"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux", "GOARCH": arch,
				"vcs.revision": commit, "vcs.modified": "false",
			} {
				if settings[key] != want {
					t.Errorf("%s: build setting %s = %q, want %q", filepath.Base(bin), key, settings[key], want)
				}
			}
			// -trimpath leaves -ldflags out of the build settings: the
			// stamped strings are in the binary's data. (The amd64 ones also
			// print them below.)
			b, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			for _, stamp := range []string{testVersion, commit, commitTime} {
				if !bytes.Contains(b, []byte(stamp)) {
					t.Errorf("%s does not hold the stamped %q", filepath.Base(bin), stamp)
				}
			}
			checkSBOM(t, bin+".cdx.json", cmd == "leaseapi")
			if arch != runtime.GOARCH || runtime.GOOS != "linux" {
				continue
			}
			out, err := exec.Command(bin, "--version").Output()
			if err != nil {
				t.Fatalf("%s --version: %v", bin, err)
			}
			for _, want := range []string{"version:     " + testVersion + "\n", "commit:      " + commit + "\n", "commit time: " + commitTime + "\n"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("%s --version = %q, lacks %q", filepath.Base(bin), out, want)
				}
			}
		}
	}
}

// checkSBOM checks that path is a CycloneDX document of the release's
// version; the server's lists the embedded store's driver.
func checkSBOM(t *testing.T, path string, server bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct{ Name, Version string } `json:"component"`
		} `json:"metadata"`
		Components []struct{ Name, Version string } `json:"components"`
	}
	if err := json.Unmarshal(b, &bom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Version != "v"+testVersion {
		t.Errorf("%s: format %q, main component %+v; want CycloneDX and version v%s", filepath.Base(path), bom.BOMFormat, bom.Metadata.Component, testVersion)
	}
	if !server {
		return
	}
	for _, c := range bom.Components {
		if c.Name == "modernc.org/sqlite" {
			return
		}
	}
	t.Errorf("%s lists no modernc.org/sqlite among its %d components", filepath.Base(path), len(bom.Components))
}

// TestReleaseRefusesBadInput: no version, or one that is not semantic, is
// refused before anything is built, and so is a working tree that differs
// from its commit.
func TestReleaseRefusesBadInput(t *testing.T) {
	t.Parallel()
	repo := git(t, ".", "rev-parse", "--show-toplevel")
	for _, version := range []string{"", "1.2", "v1.02.0", "1.2.3.4", "1.2.3-"} {
		dist := filepath.Join(t.TempDir(), "dist")
		out, err := release(t, repo, version, dist)
		if err == nil || !strings.Contains(out, "is not a semantic version; run make release VERSION=1.2.3") {
			t.Errorf("make release VERSION=%q: %v, want refused as not a semantic version:\n%s", version, err, out)
		}
		if _, err := os.Stat(dist); err == nil {
			t.Errorf("make release VERSION=%q created %s", version, dist)
		}
	}
	dir := filepath.Join(t.TempDir(), "leaseapi")
	checkout(t, repo, dir, git(t, repo, "rev-parse", "HEAD"))
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not committed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(t.TempDir(), "dist")
	out, err := release(t, dir, "1.0.0", dist)
	if err == nil || !strings.Contains(out, "the working tree has changes or untracked files; a release is built from a commit") {
		t.Errorf("make release with an untracked file: %v, want refused:\n%s", err, out)
	}
	if _, err := os.Stat(dist); err == nil {
		t.Errorf("make release with an untracked file created %s", dist)
	}
}
