package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuild(t *testing.T) {
	t.Parallel()
	vcs := func(modified string) *debug.BuildInfo {
		return &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/leaseapi/leaseapi", Version: "(devel)"},
			Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "23bd4ba0"},
				{Key: "vcs.time", Value: "2026-12-06T10:00:00Z"},
				{Key: "vcs.modified", Value: modified},
			},
		}
	}
	for _, tc := range []struct {
		name  string
		bi    *debug.BuildInfo
		stamp [3]string // Version, Commit, CommitTime
		want  Info
	}{
		{"working tree", vcs("false"), [3]string{},
			Info{"devel", "23bd4ba0", "2026-12-06T10:00:00Z", "go1.26.8"}},
		{"dirty working tree", vcs("true"), [3]string{},
			Info{"devel+dirty", "23bd4ba0", "2026-12-06T10:00:00Z", "go1.26.8"}},
		{"release stamp wins", vcs("false"), [3]string{"v1.2.3", "abc", "2026-12-07T00:00:00Z"},
			Info{"1.2.3", "abc", "2026-12-07T00:00:00Z", "go1.26.8"}},
		{"go install module@version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.0.0"}}, [3]string{},
			Info{"1.0.0", Unknown, Unknown, "go1.26.8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuild(tc.bi, tc.stamp[0], tc.stamp[1], tc.stamp[2])
			if got != tc.want {
				t.Errorf("fromBuild = %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := fromBuild(nil, "", "", ""); got.Version != "devel" || got.Commit != Unknown || got.GoVersion == "" {
		t.Errorf("fromBuild(nil) = %+v, want devel, %s and the runtime's Go", got, Unknown)
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	got := Info{"1.0.0", "abc", "2026-12-07T00:00:00Z", "go1.26.8"}.String()
	for _, want := range []string{"version:     1.0.0\n", "commit:      abc\n", "commit time: 2026-12-07T00:00:00Z\n", "go:          go1.26.8\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("String() = %q, lacks %q", got, want)
		}
	}
}

func TestIsFlag(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]bool{"--version": true, "-version": true, "version": false, "--version x": false, "": false, "-v": false} {
		if got := IsFlag(strings.Fields(args)); got != want {
			t.Errorf("IsFlag(%q) = %v, want %v", args, got, want)
		}
	}
}
