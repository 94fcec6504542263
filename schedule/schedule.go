// Package schedule is the one meaning of a job's schedule in leaseapi: the
// runner (jobs), the server and leasectl all parse specs and compute ticks
// with it, so that a spec yields the same ticks everywhere.
//
// A spec is robfig/cron v3 syntax: five fields (minute first), six fields
// (seconds first), a descriptor such as @hourly or @daily, or @every D. A
// CRON_TZ=<zone> or TZ=<zone> prefix names the zone the fields are read in,
// and fields must follow it; without one they are read in UTC (Parse) or in
// a zone the caller chooses (ParseIn). The day of week is 0-7 as in
// crontab(5), 0 and 7 both Sunday. @every D ticks at the multiples of D
// since the Unix epoch, not at multiples of D since some process started,
// so that every replica and the server agree on its ticks; D must be a
// whole number of milliseconds and at least MinInterval. Ticks lie in years
// 0001-9999 (UTC). No spec makes the parser panic (FuzzParse).
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

// MinInterval is the shortest gap between two ticks a spec may have: no
// lease is shorter than a second, so a job cannot run more often.
const MinInterval = time.Second

// parser accepts standard five-field specs, six fields with leading seconds,
// and descriptors (@hourly). It never sees a zone: ParseIn reads the zone
// itself (robfig/cron panics on a zone with no fields after it).
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
// words fit for the person who wrote the spec. It never panics.
func ParseIn(spec string, loc *time.Location) (*Schedule, error) {
	return parse(spec, loc, false)
}

// ParseStored parses a spec a store holds, with its fields read in UTC:
// what Parse accepts, and what earlier versions accepted and stored, which
// Parse now refuses (@every intervals from 1 ms, CRON_TZ=Local, an empty
// TZ=), so that a job registered then keeps its ticks.
func ParseStored(spec string) (*Schedule, error) {
	return parse(spec, time.UTC, true)
}

// zonePrefixes are the prefixes of a spec's first field that name its zone.
var zonePrefixes = []string{"CRON_TZ=", "TZ="}

// cutZone returns the zone name field names, if it names one.
func cutZone(field string) (name string, ok bool) {
	for _, p := range zonePrefixes {
		if name, ok := strings.CutPrefix(field, p); ok {
			return name, true
		}
	}
	return "", false
}

func parse(spec string, loc *time.Location, stored bool) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	if len(spec) > MaxSpecLength {
		return nil, fmt.Errorf("the schedule is %d bytes long; at most %d are allowed", len(spec), MaxSpecLength)
	}
	fields := strings.Fields(spec)
	if len(fields) == 0 {
		return nil, errors.New("the schedule is empty")
	}
	zoneField := fields[0]
	zone, hasZone := cutZone(zoneField)
	if hasZone {
		fields = fields[1:]
		if len(fields) == 0 {
			return nil, fmt.Errorf("the schedule names a zone (%s) but no fields: add them after it, as in %q",
				strings.TrimSpace(spec), "CRON_TZ=Europe/Berlin 0 7 * * *")
		}
		if _, again := cutZone(fields[0]); again {
			return nil, errors.New("the schedule names a zone twice: keep one CRON_TZ= (or TZ=) before the fields")
		}
		var err error
		if loc, err = loadZone(zoneField, zone, loc, stored); err != nil {
			return nil, err
		}
	}
	s := &Schedule{spec: spec}
	if fields[0] == "@every" {
		d, err := parseEvery(fields[1:], hasZone, stored)
		if err != nil {
			return nil, err
		}
		s.every = d
	} else {
		if strings.HasPrefix(fields[0], "@") && len(fields) > 1 {
			return nil, fmt.Errorf("the descriptor %s takes nothing after it: remove %q", fields[0], strings.Join(fields[1:], " "))
		}
		if n := len(fields); n == 5 || n == 6 {
			dow, err := sundaySeven(fields[n-1])
			if err != nil {
				return nil, err
			}
			fields = append(fields[:n-1:n-1], dow)
		}
		c, err := parser.Parse(strings.Join(fields, " "))
		if err != nil {
			return nil, err
		}
		cs, ok := c.(*cron.SpecSchedule)
		if !ok {
			return nil, fmt.Errorf("unexpected schedule type %T", c)
		}
		s.cron = newCronTicks(cs, loc, anchored(fields))
	}
	if s.Next(reference).IsZero() {
		return nil, errors.New("the schedule never fires")
	}
	s.gap = sync.OnceValue(s.minGap)
	return s, nil
}

// loadZone loads the zone a spec names. Local, this host's zone, is
// refused in a new spec: it differs between the machines that read the
// spec, so they would disagree on its ticks. A stored spec reads it in loc,
// the caller's zone, and an empty name in UTC, as earlier versions did.
func loadZone(field, name string, loc *time.Location, stored bool) (*time.Location, error) {
	if name == "" {
		if stored {
			return time.UTC, nil // robfig/cron loaded "" as UTC
		}
		return nil, fmt.Errorf("the schedule's %s names no zone: write a zone name such as Europe/Berlin after the =", field)
	}
	if name == "Local" {
		if stored {
			return loc, nil
		}
		return nil, errors.New("the schedule's zone Local is each machine's own, so replicas and the server would disagree on its ticks: name the zone, such as Europe/Berlin")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("the schedule's zone %q is not a zone name such as Europe/Berlin: %w", name, err)
	}
	return loc, nil
}

// parseEvery parses the arguments of @every: one Go duration, a whole
// number of milliseconds, at least MinInterval (1 ms for a stored spec).
func parseEvery(args []string, hasZone, stored bool) (time.Duration, error) {
	if hasZone {
		return 0, errors.New("@every takes no zone: its ticks are multiples of its interval since the Unix epoch; remove the CRON_TZ= (or TZ=) prefix")
	}
	if len(args) != 1 {
		return 0, errors.New("@every needs one Go duration such as 30s or 5m after it")
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		return 0, fmt.Errorf("@every needs a Go duration such as 30s or 5m: %w", err)
	}
	if d <= 0 || d%time.Millisecond != 0 {
		return 0, errors.New("the @every interval must be a positive whole number of milliseconds")
	}
	if d < MinInterval && !stored {
		return 0, fmt.Errorf("the @every interval %s is shorter than %s: no lease is shorter, so a job cannot run more often", d, MinInterval)
	}
	return d, nil
}

// String returns the spec as it was parsed.
func (s *Schedule) String() string { return s.spec }

// Next returns the first tick strictly after t, or the zero time when the
// schedule does not fire again within five years (robfig/cron's horizon)
// or that tick lies outside years 0001–9999 (UTC), which no store keeps.
// The zero instant, 0001-01-01T00:00:00Z, is no tick: it means none.
// Across daylight-saving changes it follows cron(8)'s rule (see the package
// documentation). Every tick leaseapi computes is a tick of Next.
func (s *Schedule) Next(t time.Time) time.Time {
	if !t.Before(maxTick) {
		return time.Time{}
	}
	var next time.Time
	if s.every > 0 {
		next = s.everyNext(t)
	} else {
		next = s.cron.next(t)
	}
	if !next.After(minTick) || next.After(maxTick) {
		return time.Time{}
	}
	return next
}

// Latest returns the newest tick at or before t, or the zero time when
// there is none within latestHorizon or in years 0001–9999.
func (s *Schedule) Latest(t time.Time) time.Time {
	if !t.After(minTick) {
		return time.Time{}
	}
	if t.After(maxTick) {
		t = maxTick.In(t.Location())
	}
	if s.every > 0 {
		return s.everyLatest(t)
	}
	// robfig/cron computes forward only. Widen a window ending at t until a
	// tick falls in it, then step forward to the last tick in it.
	for w := time.Second; w <= latestHorizon; w *= 2 {
		from := t.Add(-w)
		if from.Before(minTick) {
			from = minTick // Next is strictly after: the first valid tick
		}
		tick := s.Next(from)
		if !tick.IsZero() && !tick.After(t) {
			for n := s.Next(tick); !n.IsZero() && !n.After(t); n = s.Next(n) {
				tick = n
			}
			return tick
		}
		if from.Equal(minTick) {
			break
		}
	}
	return time.Time{}
}

// minTick and maxTick bound the ticks Next and Latest return: the years
// 0001–9999 of RFC 3339, which every store and client can hold, without
// minTick itself, the zero time.
var (
	minTick = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	maxTick = time.Date(9999, time.December, 31, 23, 59, 59, 999999999, time.UTC)
)

// everyNext is Next of @every D for t before maxTick. The ticks are the
// multiples of D since the Unix epoch, counted in milliseconds (D is a
// whole number of them), which int64 holds for years far beyond 0001–9999:
// no wrap-around, unlike nanoseconds, which cover only 1678–2262.
func (s *Schedule) everyNext(t time.Time) time.Time {
	if t.Before(minTick.Add(-s.every)) {
		return time.Time{} // the next tick, at most D later, is before year 1
	}
	return s.everyTick(t, 1).In(t.Location())
}

// everyLatest is Latest of @every D for t in years 0001–9999.
func (s *Schedule) everyLatest(t time.Time) time.Time {
	tick := s.everyTick(t, 0)
	if !tick.After(minTick) {
		return time.Time{}
	}
	return tick.In(t.Location())
}

// everyTick returns the newest multiple of D at or before t, plus ahead
// multiples; t lies within D before year 1 and maxTick.
func (s *Schedule) everyTick(t time.Time, ahead int64) time.Time {
	ms := t.Unix()*1000 + int64(t.Nanosecond())/1e6 // floor: Nanosecond is not negative
	d := s.every.Milliseconds()
	q := ms / d
	if ms%d < 0 {
		q-- // floor division before the epoch
	}
	return time.UnixMilli((q + ahead) * d)
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
	fields := strings.Fields(trimmed)
	if loc == nil || loc.String() == "UTC" || len(fields) == 0 || fields[0] == "@every" {
		return spec, nil
	}
	if _, ok := cutZone(fields[0]); ok {
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
