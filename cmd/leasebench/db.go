package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/lib/pq"
)

// benchDB is the fresh database of one benchmark run.
type benchDB struct {
	admin *sql.DB // on the server's maintenance database, to create and drop
	db    *sql.DB // on the benchmark's database, for seeding and checks
	name  string
	dsn   string
}

// createDatabase creates leaseapi_bench_<pid><suffix> on the server of
// adminDSN.
func createDatabase(ctx context.Context, adminDSN, suffix string) (*benchDB, error) {
	admin, err := sql.Open("postgres", adminDSN)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", redact(adminDSN), err)
	}
	name := fmt.Sprintf("leaseapi_bench_%d%s", os.Getpid(), suffix)
	// A database left by a killed run with the same pid goes first.
	if _, err := admin.ExecContext(ctx, dropDatabase(name)); err != nil {
		admin.Close()
		return nil, fmt.Errorf("drop old %s: %w", name, err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+pq.QuoteIdentifier(name)); err != nil {
		admin.Close()
		return nil, fmt.Errorf("create database %s on %s: %w", name, redact(adminDSN), err)
	}
	u, err := url.Parse(adminDSN)
	if err != nil {
		admin.Close()
		return nil, fmt.Errorf("parse -dsn: %w", err)
	}
	u.Path = "/" + name
	b := &benchDB{admin: admin, name: name, dsn: u.String()}
	b.db, err = sql.Open("postgres", b.dsn)
	if err != nil {
		_ = b.drop()
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	return b, nil
}

func dropDatabase(name string) string {
	return "DROP DATABASE IF EXISTS " + pq.QuoteIdentifier(name) + " WITH (FORCE)"
}

// drop drops the database, whatever still holds connections to it.
func (b *benchDB) drop() error {
	if b.db != nil {
		b.db.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := b.admin.ExecContext(ctx, dropDatabase(b.name))
	b.admin.Close()
	if err != nil {
		return fmt.Errorf("drop database %s: %w", b.name, err)
	}
	return nil
}

// redact hides a password in a URL DSN.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(dsn)"
	}
	return u.Redacted()
}

// truncateQuery empties the tables between phases that need a known size.
const truncateQuery = `TRUNCATE leases, runs, job_policies`

// seedLeasesQuery adds the leases list-(from+1) .. list-to in one
// statement, with a mix of the four states. Run with the triggers off
// (session_replication_role = replica): the run history plays no part in
// listing, and 1 M trigger calls would dominate the seeding time.
const seedLeasesQuery = `
INSERT INTO leases (job_id, owner, token, tick, ttl_ms, acquired_at, renewed_at, expires_at,
	released_at, revoked_at, last_completed_tick, last_outcome)
SELECT 'list-' || lpad(i::text, 7, '0'), 'replica-' || (i % 200), 1 + i % 7,
	date_trunc('minute', now()), 30000, now(), now(),
	CASE i % 4 WHEN 0 THEN now() + interval '1 hour' ELSE now() - interval '1 minute' END,
	CASE i % 4 WHEN 1 THEN now() - interval '1 minute' END,
	CASE i % 4 WHEN 2 THEN now() - interval '1 minute' END,
	CASE i % 4 WHEN 1 THEN date_trunc('minute', now()) END,
	CASE i % 4 WHEN 1 THEN 'succeeded' WHEN 2 THEN 'revoked' END
FROM generate_series($1::bigint + 1, $2::bigint) AS i`

// listJobID is the job id of seeded lease i (1-based).
func listJobID(i int) string {
	return fmt.Sprintf("list-%07d", i)
}

// seedLeases grows the seeded leases from `from` to `to` rows and then
// vacuums and analyzes the table, as autovacuum would after a load.
func (b *benchDB) seedLeases(ctx context.Context, from, to int) error {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SET session_replication_role = replica`); err != nil {
		return fmt.Errorf("seed: disable triggers: %w", err)
	}
	if _, err := conn.ExecContext(ctx, seedLeasesQuery, from, to); err != nil {
		return fmt.Errorf("seed leases %d..%d: %w", from+1, to, err)
	}
	if _, err := conn.ExecContext(ctx, `SET session_replication_role = DEFAULT`); err != nil {
		return fmt.Errorf("seed: enable triggers: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `VACUUM (ANALYZE) leases`); err != nil {
		return fmt.Errorf("seed: vacuum: %w", err)
	}
	return nil
}

// herdCheckQuery summarizes the leases of one herd's jobs: how many rows,
// how many grants (the highest token per job sums the grants, since every
// grant increments it), and how many runs the grants recorded.
const herdCheckQuery = `
SELECT count(*), COALESCE(sum(l.token), 0),
	(SELECT count(*) FROM runs WHERE job_id >= $1 AND job_id < $1 || '~')
FROM leases AS l WHERE l.job_id >= $1 AND l.job_id < $1 || '~'`

// herdCheck is what the database says about one herd.
type herdCheck struct {
	jobs, tokens, runs int64
}

func (b *benchDB) checkHerd(ctx context.Context, prefix string) (herdCheck, error) {
	var c herdCheck
	err := b.db.QueryRowContext(ctx, herdCheckQuery, prefix).Scan(&c.jobs, &c.tokens, &c.runs)
	if err != nil {
		return c, fmt.Errorf("check herd %s: %w", prefix, err)
	}
	return c, nil
}

// groupsCheckQuery summarizes the groups of one herd's jobs (the jobs and
// groups whose names start with $1 and a dash): how many jobs hold a
// slot, how many slot rows the groups have, and the sum of the groups'
// last slot tokens (every grant in a group takes the next one).
const groupsCheckQuery = `
SELECT (SELECT count(*) FROM leases WHERE job_id >= $1 || '-' AND job_id < $1 || '.' AND slot IS NOT NULL),
	(SELECT count(*) FROM group_slots WHERE starts_with(group_name, $1 || '-')),
	(SELECT COALESCE(sum(slot_token), 0) FROM groups WHERE starts_with(name, $1 || '-'))`

// groupsCheck is what the database says about the groups of one herd.
type groupsCheck struct {
	holders, slots, slotTokens int64
}

// policiesCheckQuery summarizes the policies of the jobs whose ids start
// with $1 and a dash: how many have one, how many of those are ok, how
// many leases show ok, and how many are left due for the sweep.
const policiesCheckQuery = `
SELECT count(p.job_id), count(*) FILTER (WHERE p.status = 'ok'), count(*) FILTER (WHERE l.alert_status = 'ok'),
	count(*) FILTER (WHERE l.policy_due_at IS NOT NULL)
FROM leases AS l LEFT JOIN job_policies AS p ON p.job_id = l.job_id
WHERE l.job_id >= $1 || '-' AND l.job_id < $1 || '.'`

// policiesCheck is what the database says about the policies of one run.
type policiesCheck struct {
	policies, ok, shownOK, due int64
}

func (b *benchDB) checkPolicies(ctx context.Context, prefix string) (policiesCheck, error) {
	var c policiesCheck
	err := b.db.QueryRowContext(ctx, policiesCheckQuery, prefix).Scan(&c.policies, &c.ok, &c.shownOK, &c.due)
	if err != nil {
		return c, fmt.Errorf("check the policies of %s: %w", prefix, err)
	}
	return c, nil
}

func (b *benchDB) checkGroups(ctx context.Context, prefix string) (groupsCheck, error) {
	var c groupsCheck
	err := b.db.QueryRowContext(ctx, groupsCheckQuery, prefix).Scan(&c.holders, &c.slots, &c.slotTokens)
	if err != nil {
		return c, fmt.Errorf("check the groups of herd %s: %w", prefix, err)
	}
	return c, nil
}

// vacuum cleans the tables between phases so that the dead rows of one
// phase do not slow the next.
func (b *benchDB) vacuum(ctx context.Context) error {
	if _, err := b.db.ExecContext(ctx, `VACUUM (ANALYZE) leases, runs, groups, group_slots, job_policies`); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// checkpoint writes every dirty buffer of the cluster now, so that a
// measured row does not pay for what an earlier one left to write.
func (b *benchDB) checkpoint(ctx context.Context) error {
	if _, err := b.admin.ExecContext(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

func (b *benchDB) truncate(ctx context.Context) error {
	if _, err := b.db.ExecContext(ctx, truncateQuery); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	return nil
}

// dbCounters are read before and after a measured run: the benchmark
// database's transactions (every store call is one statement in its own
// transaction, so this counts the calls that reached the database) and the
// cluster's next transaction id (how many xids were assigned: a refusal
// on the fast path assigns none; this one is cluster-wide, so other
// databases' writes count too).
type dbCounters struct {
	xacts    int64
	nextXid  int64
	sessions int64 // sessions established on the database (connection churn)
}

const countersQuery = `
SELECT xact_commit + xact_rollback, pg_snapshot_xmax(pg_current_snapshot())::text::bigint, sessions
FROM pg_stat_database WHERE datname = current_database()`

// idleQuery counts the other sessions on the benchmark database.
const idleQuery = `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`

// counters reads the counters; with idle, once the sessions of the last
// run have ended: a session reports its transactions to pg_stat_database
// when it exits (or lazily while it lives), so the run's pool must be
// closed first.
func (b *benchDB) counters(ctx context.Context, idle bool) (dbCounters, error) {
	deadline := time.Now().Add(5 * time.Second)
	for idle {
		var others int
		if err := b.db.QueryRowContext(ctx, idleQuery).Scan(&others); err != nil {
			return dbCounters{}, fmt.Errorf("count sessions: %w", err)
		}
		if others == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var c dbCounters
	if err := b.db.QueryRowContext(ctx, countersQuery).Scan(&c.xacts, &c.nextXid, &c.sessions); err != nil {
		return dbCounters{}, fmt.Errorf("read counters: %w", err)
	}
	return c, nil
}
