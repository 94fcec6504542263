package stores

import (
	"database/sql"
	"strings"
	"time"

	"github.com/leaseapi/leaseapi"
)

// JobHealthSQL is the query of both stores' JobHealth, spelled once: the
// first jobs by id ($limit) from the leases table and, for each, four
// correlated subqueries that read its newest runs backwards through
// runs_job_at_idx (job_id, COALESCE(started_at, tick)) — one set-based
// statement, never a statement per job. The finished-run subqueries stop
// at the newest matching run; the failure count reads the runs since the
// newest success. Every time is returned in Unix milliseconds.
//
// The dialect fills in: with (a WITH clause or ""), now (the store's
// clock as a column of that clause or a parameter), from (what the page's
// FROM adds), never (a time below every run's start), ms (a time
// expression as Unix milliseconds) and limit (the parameter of the limit).
type JobHealthSQL struct {
	With, Now, From, Never, Limit string
	Ms                            func(expr string) string
}

// Query is the statement.
func (d JobHealthSQL) Query() string {
	newest := func(col string, outcomes string) string {
		return `(SELECT ` + col + ` FROM runs r WHERE r.job_id = l.job_id AND r.outcome IN (` + outcomes + `)
		ORDER BY COALESCE(r.started_at, r.tick) DESC LIMIT 1)`
	}
	const finished = `'succeeded', 'failed', 'expired', 'revoked'`
	q := d.With + `
SELECT l.job_id,
	CASE WHEN l.paused_at IS NOT NULL THEN 1 ELSE 0 END AS paused,
	CASE WHEN ` + OverdueCondition + ` THEN 1 ELSE 0 END AS overdue,
	l.missed_ticks,
	l.alert_status,
	l.alert_reasons,
	CASE WHEN l.revoked_at IS NULL AND l.released_at IS NULL AND l.expires_at <= ` + d.Now + ` THEN 1 ELSE 0 END AS open_expired,
	` + d.Ms("l.acquired_at") + ` AS acquired_ms,
	` + d.Ms("l.expires_at") + ` AS expires_ms,
	` + newest(d.Ms("r.ended_at"), `'succeeded'`) + ` AS last_success_ms,
	` + newest(d.Ms("r.ended_at"), finished) + ` AS last_finish_ms,
	` + newest(d.Ms("r.ended_at")+" - "+d.Ms("r.started_at"), finished) + ` AS last_duration_ms,
	(SELECT count(*) FROM runs f WHERE f.job_id = l.job_id AND f.outcome IN ('failed', 'expired')
		AND COALESCE(f.started_at, f.tick) > COALESCE(` + newest("COALESCE(r.started_at, r.tick)", `'succeeded'`) + `, ` + d.Never + `)) AS failures,
	(SELECT count(*) FROM leases) AS total,
	` + d.Ms(d.Now) + ` AS now_ms
FROM (SELECT * FROM leases ORDER BY job_id LIMIT ` + d.Limit + `) AS l` + d.From + `
ORDER BY l.job_id`
	return strings.TrimSpace(q)
}

// JobHealthRow is one row of JobHealthSQL.
type JobHealthRow struct {
	JobID          string         `db:"job_id"`
	Paused         int64          `db:"paused"`
	Overdue        int64          `db:"overdue"`
	MissedTicks    int64          `db:"missed_ticks"`
	AlertStatus    sql.NullString `db:"alert_status"`
	AlertReasons   string         `db:"alert_reasons"`
	OpenExpired    int64          `db:"open_expired"`
	AcquiredMs     int64          `db:"acquired_ms"`
	ExpiresMs      int64          `db:"expires_ms"`
	LastSuccessMs  sql.NullInt64  `db:"last_success_ms"`
	LastFinishMs   sql.NullInt64  `db:"last_finish_ms"`
	LastDurationMs sql.NullInt64  `db:"last_duration_ms"`
	Failures       int64          `db:"failures"`
	Total          int64          `db:"total"`
	NowMs          int64          `db:"now_ms"`
}

// JobHealthPage turns the rows of JobHealthSQL into the page. A grant
// that expired and that no grant has taken over yet still has its run
// marked running: it counts here as an expired run that ended at its
// expiresAt, as Stats counts it.
func JobHealthPage(rows []JobHealthRow, now time.Time) leaseapi.JobHealthPage {
	page := leaseapi.JobHealthPage{Jobs: make([]leaseapi.JobHealth, len(rows)), Now: now}
	for i, r := range rows {
		h := leaseapi.JobHealth{
			JobID:               r.JobID,
			ConsecutiveFailures: r.Failures,
			Overdue:             r.Overdue != 0,
			Paused:              r.Paused != 0,
			MissedTicks:         r.MissedTicks,
			AlertStatus:         leaseapi.AlertStatus(r.AlertStatus.String),
		}
		if h.AlertStatus == leaseapi.AlertAlerting {
			h.AlertReasons = leaseapi.ParseAlertReasons(r.AlertReasons)
		}
		finish, duration := r.LastFinishMs, r.LastDurationMs.Int64
		if r.OpenExpired != 0 {
			h.ConsecutiveFailures++
			if !finish.Valid || r.ExpiresMs >= finish.Int64 {
				finish = sql.NullInt64{Int64: r.ExpiresMs, Valid: true}
				duration = r.ExpiresMs - r.AcquiredMs
			}
		}
		if r.LastSuccessMs.Valid {
			h.LastSuccess = time.UnixMilli(r.LastSuccessMs.Int64).UTC()
		}
		if finish.Valid {
			h.LastFinish = time.UnixMilli(finish.Int64).UTC()
			h.LastDuration = time.Duration(duration) * time.Millisecond
		}
		page.Jobs[i] = h
		page.Truncated = r.Total - int64(len(rows))
	}
	return page
}
