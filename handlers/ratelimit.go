package handlers

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/leaseapi/leaseapi/api"
)

// rateLimiters hold a token bucket per credential, so that one
// credential's acquires and reads cannot take an instance from the others.
// The limit is the credential's ratePerSecond, else the configured default
// (LEASEAPI_RATE_LIMIT); 0 is no limit. The bucket holds one second's
// worth of calls. Heartbeats and releases are never limited (limiting them
// could make a holder lose its lease), and the open API has no credential
// to limit.
type rateLimiters struct {
	def float64 // calls per second; 0: none

	mu sync.Mutex
	m  map[string]*rate.Limiter // by key and rate
}

// maxLimiters bounds the buckets kept; past it the map starts over (a
// bucket is recreated full, which only ever lets a caller through).
const maxLimiters = 10_000

func newRateLimiters(def float64) *rateLimiters {
	return &rateLimiters{def: def, m: make(map[string]*rate.Limiter)}
}

// take spends one call of key's bucket at perSecond (nil: the default), or
// returns how long to wait when the bucket is empty; nothing is spent then.
func (l *rateLimiters) take(key string, perSecond *float64) (wait time.Duration, limited bool) {
	lim := l.limiter(key, perSecond)
	if lim == nil {
		return 0, false
	}
	res := lim.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return d, true
	}
	return 0, false
}

// limiter is key's bucket at perSecond (nil: the default), nil when there
// is no limit.
func (l *rateLimiters) limiter(key string, perSecond *float64) *rate.Limiter {
	r := l.def
	if perSecond != nil {
		r = *perSecond
	}
	if r <= 0 {
		return nil
	}
	k := key + "@" + strconv.FormatFloat(r, 'g', -1, 64)
	l.mu.Lock()
	lim, ok := l.m[k]
	if !ok {
		if len(l.m) >= maxLimiters {
			clear(l.m)
		}
		lim = rate.NewLimiter(rate.Limit(r), max(1, int(math.Ceil(r))))
		l.m[k] = lim
	}
	l.mu.Unlock()
	return lim
}

// rateLimited is the 429 of a call beyond its credential's rate.
func rateLimited(wait time.Duration) error {
	return &requestError{
		status: http.StatusTooManyRequests, code: api.CodeRateLimited,
		detail: "this credential sent more calls than its rate allows; nothing was done, retry after Retry-After seconds",
		header: http.Header{"Retry-After": {strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))}},
	}
}
