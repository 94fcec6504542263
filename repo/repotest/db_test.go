package repotest

import "testing"

func TestDatabaseName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		binary string
		pid    int
		want   string
	}{
		{"/tmp/go-build123/b001/repo.test", 42, "leaseapi_test_repo_42"},
		{"repotest.test", 7, "leaseapi_test_repotest_7"},
		{"/tmp/handlers.test.exe", 7, "leaseapi_test_handlers_7"},
		{"./My-Pkg.v2.test", 1, "leaseapi_test_my_pkg_v2_1"},
		{"...test", 1, "leaseapi_test_pkg_1"},
		{"/x/" + "averyveryveryveryverylongpackagenamethatgoesonandon.test", 4194304,
			"leaseapi_test_averyveryveryveryverylongpacka_4194304"},
	} {
		got := databaseName(tc.binary, tc.pid)
		if got != tc.want {
			t.Errorf("databaseName(%q, %d): got %q, want %q", tc.binary, tc.pid, got, tc.want)
		}
		if len(got) > 63 {
			t.Errorf("databaseName(%q, %d): got %d bytes, want at most 63 (a Postgres identifier)", tc.binary, tc.pid, len(got))
		}
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dsn, want string
	}{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/db1?sslmode=disable"},
		{"postgresql://u:p@h/x?dbname=y&sslmode=disable", "postgresql://u:p@h/db1?sslmode=disable"},
		{"postgres://u@h", "postgres://u@h/db1"},
		{"host=h user=u dbname=x", "host=h user=u dbname=x dbname=db1"},
	} {
		got, err := withDatabase(tc.dsn, "db1")
		if err != nil || got != tc.want {
			t.Errorf("withDatabase(%q): got %q, %v, want %q, nil", tc.dsn, got, err, tc.want)
		}
	}
}

func TestWithConnectTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dsn, want string
	}{
		{"postgres://u@h/d?sslmode=disable", "postgres://u@h/d?connect_timeout=2&sslmode=disable"},
		{"postgres://u@h/d?connect_timeout=9", "postgres://u@h/d?connect_timeout=9"},
		{"host=h", "host=h connect_timeout=2"},
		{"host=h connect_timeout=9", "host=h connect_timeout=9"},
	} {
		if got := withConnectTimeout(tc.dsn); got != tc.want {
			t.Errorf("withConnectTimeout(%q): got %q, want %q", tc.dsn, got, tc.want)
		}
	}
}
