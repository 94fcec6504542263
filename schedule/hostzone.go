package schedule

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// HostZone returns this host's time zone by its IANA name, which the
// server can load too (time.Local has no such name): $TZ when it names a
// zone, else the zone /etc/localtime links to, else UTC when neither says
// (a container without zone data runs in UTC).
func HostZone() (*time.Location, error) {
	return hostZone(os.Getenv("TZ"), "/etc/localtime")
}

func hostZone(tz, localtime string) (*time.Location, error) {
	if name, ok := strings.CutPrefix(tz, ":"); tz != "" {
		if !ok {
			name = tz
		}
		if name == "" || strings.HasPrefix(name, "/") {
			return nil, fmt.Errorf("TZ=%q names a file, not a zone: set TZ to a zone name such as Europe/Berlin", tz)
		}
		loc, err := time.LoadLocation(name)
		if err != nil {
			return nil, fmt.Errorf("TZ=%q: %w", tz, err)
		}
		return loc, nil
	}
	target, err := filepath.EvalSymlinks(localtime)
	if errors.Is(err, os.ErrNotExist) {
		return time.UTC, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the host's zone from %s: %w", localtime, err)
	}
	_, name, ok := strings.Cut(target, "zoneinfo/")
	if !ok {
		return nil, fmt.Errorf("%s is not a link into a zoneinfo directory: set TZ to the host's zone name", localtime)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("the host's zone %q: %w", name, err)
	}
	return loc, nil
}
