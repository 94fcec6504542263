// Package version says which build of leaseapi is running: its version, the
// commit it was built from and when that commit was made, and the Go that
// built it. Every binary prints it (`--version`), and the server serves it
// (/healthz, leaseapi_build_info, the console).
//
// The values come from the build information Go embeds (module version, VCS
// revision and time, with -buildvcs); `make release VERSION=x.y.z` stamps
// Version, Commit and CommitTime with -ldflags -X, which wins over them:
//
//	-X github.com/leaseapi/leaseapi/internal/version.Version=1.0.0
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Stamped with -ldflags -X by make release; empty in any other build.
var (
	// Version is the release's semantic version without a leading v
	// ("1.0.0").
	Version string
	// Commit is the full revision the release was built from.
	Commit string
	// CommitTime is that commit's time, RFC 3339 in UTC.
	CommitTime string
)

// Unknown stands for a value the build did not record (a build outside a
// repository, or `go run`).
const Unknown = "unknown"

// Info is what a binary knows of its own build.
type Info struct {
	// Version is the semantic version without a leading v, "devel" for a
	// build of a working tree that no release stamped (plus "+dirty" when it
	// had uncommitted changes).
	Version    string
	Commit     string
	CommitTime string
	GoVersion  string
}

// Get returns the running binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuild(bi, Version, Commit, CommitTime)
}

// fromBuild merges the stamped values over what bi records; bi may be nil
// (a binary built without module support).
func fromBuild(bi *debug.BuildInfo, version, commit, commitTime string) Info {
	info := Info{GoVersion: runtime.Version()}
	var modified bool
	if bi != nil {
		info.GoVersion = bi.GoVersion
		// The main module's version is "(devel)" for a build of a working
		// tree, and the tag's version for `go install module@vX.Y.Z`.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = strings.TrimPrefix(v, "v")
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.time":
				info.CommitTime = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if info.Version == "" {
		info.Version = "devel"
		if modified {
			info.Version += "+dirty"
		}
	}
	if version != "" {
		info.Version = strings.TrimPrefix(version, "v")
	}
	if commit != "" {
		info.Commit = commit
	}
	if commitTime != "" {
		info.CommitTime = commitTime
	}
	if info.Commit == "" {
		info.Commit = Unknown
	}
	if info.CommitTime == "" {
		info.CommitTime = Unknown
	}
	return info
}

// String is what `--version` prints: one line per field.
func (i Info) String() string {
	return fmt.Sprintf("version:     %s\ncommit:      %s\ncommit time: %s\ngo:          %s\n",
		i.Version, i.Commit, i.CommitTime, i.GoVersion)
}

// IsFlag reports whether args ask for the version and nothing else:
// `--version` or `-version`, the flag every binary takes.
func IsFlag(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-version")
}
