package postgres_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// A multi-host DSN none of whose hosts accepts a read-write session (here a
// real Postgres whose sessions are made read-only, which lib/pq's
// target_session_attrs check refuses exactly as it refuses a hot standby) is
// unavailability, not an internal error; the same DSN with a writable host
// among them connects.
func TestMultiHostDSNWithoutAWritablePrimaryIsUnavailable(t *testing.T) {
	u, err := url.Parse(repotest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	dbname := strings.TrimPrefix(u.Path, "/")
	dsn := func(readOnly string) string {
		return fmt.Sprintf("host=%s,%s port=%s,%s user=%s dbname=%s sslmode=disable target_session_attrs=read-write connect_timeout=2 default_transaction_read_only=%s",
			host, host, port, port, u.User.Username(), dbname, readOnly)
	}
	c, err := postgres.NewConnector(dsn("on"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Connect(t.Context())
	if !errors.Is(err, leaseapi.ErrUnavailable) {
		t.Fatalf("Connect to read-only hosts = %v, want ErrUnavailable", err)
	}
	c, err = postgres.NewConnector(dsn("off"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c.Connect(t.Context())
	if err != nil {
		t.Fatalf("Connect to writable hosts: %v", err)
	}
	_ = conn.Close()
}
