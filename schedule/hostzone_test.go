package schedule

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHostZone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	zoneinfo := filepath.Join(dir, "usr", "share", "zoneinfo", "Europe")
	if err := os.MkdirAll(zoneinfo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(zoneinfo, "Berlin"), []byte("TZif"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "localtime")
	if err := os.Symlink(filepath.Join(zoneinfo, "Berlin"), link); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("TZif"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, tz, localtime, want string
		wantErr                   bool
	}{
		{"TZ", "America/New_York", link, "America/New_York", false},
		{"TZWithColon", ":Asia/Tokyo", link, "Asia/Tokyo", false},
		{"Link", "", link, "Europe/Berlin", false},
		{"NoLocaltime", "", filepath.Join(dir, "missing"), "UTC", false},
		{"TZFile", "/etc/localtime", link, "", true},
		{"TZUnknown", "Mars/Olympus", link, "", true},
		{"NotALink", "", plain, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			loc, err := hostZone(tc.tz, tc.localtime)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %v, want an error", loc)
				}
				return
			}
			if err != nil || loc.String() != tc.want {
				t.Fatalf("got %v, %v; want %s", loc, err, tc.want)
			}
		})
	}
}
