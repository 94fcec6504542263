// Package schedule is the one meaning of a job's schedule in leaseapi: the
// runner (jobs), the server and leasectl all parse specs and compute ticks
// with it, so that a spec yields the same ticks everywhere.
//
// A spec is robfig/cron v3 syntax: five fields (minute first), six fields
// (seconds first), a descriptor such as @hourly or @daily, or @every D. A
// CRON_TZ=<zone> or TZ=<zone> prefix names the zone the fields are read in;
// without one they are read in UTC (Parse) or in a zone the caller chooses
// (ParseIn). @every D ticks at the multiples of D since the Unix epoch, not
// at multiples of D since some process started, so that every replica and
// the server agree on its ticks; D must be a whole number of milliseconds.
//
// Daylight-saving changes follow the rule of cron(8) (Vixie cron, cronie).
// A spec whose minute and hour fields both begin with neither * nor ? (30 2,
// 0 1-3, 15 8-18/2, @daily) is anchored to the wall clock: a time that a
// forward change skips ticks once, at the first instant after the gap, and a
// time that a backward change repeats ticks once, at its first occurrence.
// This holds for changes of less than three hours; larger ones are taken as
// they come. Any other spec (*/5 *, 0 *, 0 */2, @hourly) ticks at every
// instant whose local time matches: twice in a repeated hour, never in a
// skipped one. Instants that coincide are one tick. A seconds field does
// not make a spec anchored or not; @every D and UTC have no changes. Next is
// the one definition of the ticks: Latest and MinGap are derived from it.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// MaxSpecLength is the longest spec the API accepts, in bytes.
const MaxSpecLength = 256

// parser accepts standard five-field specs, six fields with leading seconds,
// and descriptors (@hourly, @every 10s).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is a parsed spec. Its ticks depend on the spec alone, never on
// when it was parsed. A Schedule is safe for concurrent use.
type Schedule struct {
	spec  string
	every time.Duration // @every D; zero for a cron spec
	cron  *cronTicks    // a cron spec; nil for @every D
	gap   func() time.Duration
}

// Parse parses spec with its fields read in UTC unless it names a zone.
func Parse(spec string) (*Schedule, error) {
	return ParseIn(spec, time.UTC)
}

// ParseIn parses spec with its fields read in loc (nil is UTC) unless the
// spec names a zone with CRON_TZ= or TZ=. The error says what is wrong in
// words fit for the person who wrote the spec.
func ParseIn(spec string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	if len(spec) > MaxSpecLength {
		return nil, fmt.Errorf("the schedule is %d bytes long; at most %d are allowed", len(spec), MaxSpecLength)
	}
	if strings.TrimSpace(spec) == "" {
		return nil, errors.New("the schedule is empty")
	}
	s := &Schedule{spec: spec}
	if rest, ok := strings.CutPrefix(strings.TrimSpace(spec), "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("@every needs a Go duration such as 30s or 5m: %w", err)
		}
		if d < time.Millisecond || d%time.Millisecond != 0 {
			return nil, errors.New("the @every interval must be a positive whole number of milliseconds")
		}
		s.every = d
	} else {
		c, err := parser.Parse(spec)
		if err != nil {
			return nil, err
		}
		fields, ok := c.(*cron.SpecSchedule)
		if !ok {
			return nil, fmt.Errorf("unexpected schedule type %T", c)
		}
		s.cron = newCronTicks(fields, loc, anchored(spec))
	}
	if s.Next(reference).IsZero() {
		return nil, errors.New("the schedule never fires")
	}
	s.gap = sync.OnceValue(s.minGap)
	return s, nil
}

// String returns the spec as it was parsed.
func (s *Schedule) String() string { return s.spec }

// Next returns the first tick strictly after t, or the zero time when the
// schedule does not fire again within five years (robfig/cron's horizon).
// Across daylight-saving changes it follows cron(8)'s rule (see the package
// documentation). Every tick leaseapi computes is a tick of Next.
func (s *Schedule) Next(t time.Time) time.Time {
	if s.every > 0 {
		n, d := t.UnixNano(), int64(s.every)
		next := n - n%d + d
		if n < 0 && n%d != 0 {
			next -= d
		}
		return time.Unix(0, next).In(t.Location())
	}
	return s.cron.next(t)
}

// Latest returns the newest tick at or before t, or the zero time when
// there is none within latestHorizon.
func (s *Schedule) Latest(t time.Time) time.Time {
	if s.every > 0 {
		n, d := t.UnixNano(), int64(s.every)
		latest := n - n%d
		if n < 0 && n%d != 0 {
			latest -= d
		}
		return time.Unix(0, latest).In(t.Location())
	}
	// robfig/cron computes forward only. Widen a window ending at t until a
	// tick falls in it, then step forward to the last tick in it.
	for w := time.Second; w <= latestHorizon; w *= 2 {
		from := t.Add(-w)
		tick := s.Next(from)
		if tick.IsZero() || tick.After(t) {
			continue
		}
		for n := s.Next(tick); !n.IsZero() && !n.After(t); n = s.Next(n) {
			tick = n
		}
		return tick
	}
	return time.Time{}
}

// latestHorizon is how far back Latest looks: beyond a leap day's four years.
const latestHorizon = 5 * 366 * 24 * time.Hour

// MinGap returns the shortest time between two consecutive ticks. For
// @every D it is D. For a cron spec it is the shortest gap among the ticks
// of the four years after 2000-01-01 UTC (at most gapTicks of them), which
// every leaseapi computes alike; a spec's finest field repeats within that
// span, and one second, the smallest gap a cron spec can have, ends the
// search early. Daylight-saving changes in those years count: a daily
// CRON_TZ=Europe/Berlin 0 2 * * * has a gap of 23 h (from 03:00 CEST on
// the day 02:00 is skipped to 02:00 CEST the next day).
func (s *Schedule) MinGap() time.Duration { return s.gap() }

// reference is the fixed instant MinGap and the never-fires check start from.
var reference = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// gapTicks bounds the ticks MinGap looks at.
const gapTicks = 4096

func (s *Schedule) minGap() time.Duration {
	if s.every > 0 {
		return s.every
	}
	end := reference.AddDate(4, 0, 0)
	prev := s.Next(reference)
	var gap time.Duration
	for i := 0; i < gapTicks; i++ {
		next := s.Next(prev)
		if next.IsZero() || next.After(end) {
			break
		}
		if d := next.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		if gap <= time.Second {
			break
		}
		prev = next
	}
	if gap == 0 {
		// One tick in four years (or fewer): its gap is at least that long.
		gap = end.Sub(reference)
	}
	return gap
}

// InZone returns spec with a CRON_TZ= prefix for loc when loc is not UTC and
// spec names no zone itself: the spec a replica that reads spec in loc sends
// to the server, which reads a spec without a zone in UTC. @every specs have
// no zone and come back unchanged. time.Local stands for the host's zone
// by its IANA name (HostZone).
func InZone(spec string, loc *time.Location) (string, error) {
	trimmed := strings.TrimSpace(spec)
	if loc == nil || loc.String() == "UTC" ||
		strings.HasPrefix(trimmed, "@every ") ||
		strings.HasPrefix(trimmed, "CRON_TZ=") || strings.HasPrefix(trimmed, "TZ=") {
		return spec, nil
	}
	if loc == time.Local || loc.String() == "Local" {
		// time.Local has no name another machine could load: the host's.
		host, err := HostZone()
		if err != nil {
			return "", err
		}
		if host.String() == "UTC" {
			return spec, nil
		}
		loc = host
	}
	return "CRON_TZ=" + loc.String() + " " + trimmed, nil
}
