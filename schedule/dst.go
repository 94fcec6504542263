package schedule

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// maxDSTChange bounds the changes of a zone's offset that the daylight-saving
// rule applies to, as in cron(8): larger jumps are taken as they come.
const maxDSTChange = 3 * time.Hour

// searchHorizon is how far past its start Next looks for a tick, as far as
// robfig/cron looks.
const searchHorizon = 5 * 366 * 24 * time.Hour

// cronTicks computes the ticks of a cron spec in its zone.
//
// It walks the zone's periods of constant offset (time.Time.ZoneBounds).
// Within a period local time is the instant plus the offset, so the ticks
// there are the instants whose local time matches the fields: robfig/cron
// finds the matching local times with the fields read in UTC, which has no
// changes (wall). At the start of a period that follows a change of less
// than maxDSTChange, an anchored spec gets cron(8)'s rule: after a forward
// change, a matching local time in the gap ticks once at the period's first
// instant; after a backward change, the local times the previous period
// already had are not ticked again.
type cronTicks struct {
	wall     cron.SpecSchedule // the spec's fields with Location UTC
	loc      *time.Location    // the zone the fields are read in
	anchored bool
}

// newCronTicks returns the ticks of spec with its fields read in loc.
func newCronTicks(spec *cron.SpecSchedule, loc *time.Location, anchored bool) *cronTicks {
	c := &cronTicks{wall: *spec, loc: loc, anchored: anchored}
	c.wall.Location = time.UTC
	return c
}

// wallYears shifts the local times robfig/cron matches 400 years ahead, a
// whole cycle of the Gregorian calendar (the same weekdays and leap days):
// unshifted, the local time 0001-01-01 00:00 would be the zero time,
// which robfig/cron and this walk read as no tick.
const wallYears = 400

// wallOf is the local time of the instant u at offset off, written as a
// UTC time wallYears ahead.
func wallOf(u time.Time, off time.Duration) time.Time {
	return u.UTC().Add(off).AddDate(wallYears, 0, 0)
}

// instantOf is the instant whose local time at offset off is w (wallOf's
// inverse).
func instantOf(w time.Time, off time.Duration) time.Time {
	return w.AddDate(-wallYears, 0, 0).Add(-off)
}

// wallAtOrAfter returns the first matching local time at or after w, both
// written as by wallOf, or the zero time within robfig/cron's horizon.
func (c *cronTicks) wallAtOrAfter(w time.Time) time.Time {
	return c.wall.Next(w.Add(-time.Nanosecond))
}

// next returns the first tick strictly after t, in t's location.
func (c *cronTicks) next(t time.Time) time.Time {
	x := t.In(c.loc) // the period searched is the one that holds x
	first := true    // x is t; else x is the start of a later period
	for !x.After(t.Add(searchHorizon)) {
		_, secs := x.Zone()
		off := time.Duration(secs) * time.Second
		start, end := x.ZoneBounds()
		if !end.IsZero() && !end.After(x) {
			// Go's time package reports the last UTC day of a leap year
			// past a zone's table (2040-12-31 in America/New_York) as
			// ending at its own start, which would stop this walk: take
			// the period to end at the next UTC midnight instead (no zone
			// changes its offset then).
			end = x.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
		}
		// from is the first local time this period may tick at.
		var from time.Time
		if first {
			from = c.wall.Next(wallOf(x, off)) // strictly after t
		} else {
			from = c.wallAtOrAfter(wallOf(x, off))
		}
		if c.anchored && !start.IsZero() {
			_, prevSecs := start.Add(-time.Nanosecond).Zone()
			prev := time.Duration(prevSecs) * time.Second
			switch change := off - prev; {
			case change > 0 && change < maxDSTChange && !first:
				// Forward: the local times [start+prev, start+off) do not
				// exist; one of them that matches ticks at start.
				if w := c.wallAtOrAfter(wallOf(start, prev)); !w.IsZero() && w.Before(wallOf(start, off)) {
					return start.In(t.Location())
				}
			case change < 0 && change > -maxDSTChange:
				// Backward: the local times before start+prev were the
				// previous period's, their first occurrence.
				if repeatEnd := wallOf(start, prev); !from.IsZero() && from.Before(repeatEnd) {
					from = c.wallAtOrAfter(repeatEnd)
				}
			}
		}
		if from.IsZero() {
			return time.Time{}
		}
		if tick := instantOf(from, off); end.IsZero() || tick.Before(end) {
			return tick.In(t.Location())
		}
		x, first = end.In(c.loc), false
	}
	return time.Time{}
}

// anchored reports whether a spec with fields (after its zone) is anchored
// to the wall clock in cron(8)'s sense: its minute and hour fields both
// begin with neither * nor ? (which robfig/cron reads as *). A seconds
// field does not count. Of the descriptors only @hourly is not anchored.
func anchored(fields []string) bool {
	switch len(fields) {
	case 1:
		return fields[0] != "@hourly"
	case 5:
		// minute hour dom month dow
	case 6:
		fields = fields[1:] // seconds first
	default:
		return false
	}
	wild := func(f string) bool { return strings.HasPrefix(f, "*") || strings.HasPrefix(f, "?") }
	return !wild(fields[0]) && !wild(fields[1])
}
