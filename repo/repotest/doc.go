// Package repotest is the test-only toolkit of the stores: a Postgres
// harness for TestMain and the conformance suite every leaseapi.Store
// implementation runs. Only _test.go files import it.
//
// # The database harness
//
// A package whose tests need Postgres calls WrapTestMain from its TestMain
// and gets its database's DSN from PostgresURL:
//
//	func TestMain(m *testing.M) { repotest.WrapTestMain(m) }
//
//	func TestSomething(t *testing.T) {
//		dsn := repotest.PostgresURL(t)
//		...
//	}
//
// WrapTestMain looks for a server in this order and takes the first that
// answers:
//
//  1. LEASEAPI_TEST_DATABASE_URL, a lib/pq URL or key=value DSN of a server
//     the tests may create and drop databases on. When it is set, it is the
//     only candidate: a server that does not answer fails the run rather than
//     silently testing somewhere else.
//  2. The local default, postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable,
//     probed with a 2 s connect timeout.
//  3. Docker, only if a daemon answers a ping: dockertest starts postgres:15,
//     set to expire after the test timeout, waits until it accepts
//     connections and purges it when the tests end.
//
// Without any of them it prints one line saying what to do (set
// LEASEAPI_TEST_DATABASE_URL, start Postgres, or run `make test`, which
// installs one on Debian) and exits 1. With -short it sets nothing up and
// PostgresURL skips the test, so `go test -short ./...` needs no database.
//
// On the server it creates one fresh database per test package, named after
// the test binary and the process id (leaseapi_test_repo_12345), so packages
// and parallel runs never share one. It applies the Postgres migrations
// through postgres.Store.Migrate, exactly as the service does, runs the tests
// and drops the database WITH (FORCE). Tests in one package share the
// database and isolate themselves by unique job ids, not by rolled-back
// transactions: expiry needs the clock to advance and contention needs
// several connections.
//
// # The conformance suite
//
// RunStoreSuite holds a store to the contract of leaseapi.Store and the
// API (api/openapi.yaml): the Postgres store and the
// embedded SQLite store both run it, so both keep the same contract,
// including the invariants under concurrent contenders.
package repotest
