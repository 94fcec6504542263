package webhook_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/webhook"
)

func TestParseEventsAndFormat(t *testing.T) {
	t.Parallel()
	got, err := webhook.ParseEvents([]string{"run.failed", "job.recovered"})
	if err != nil || len(got) != 2 || got[0] != webhook.RunFailed || got[1] != webhook.JobRecovered {
		t.Fatalf("ParseEvents = %v, %v", got, err)
	}
	for _, bad := range [][]string{nil, {}, {"run.failed", "run.failed"}, {"run.fail"}, {"RUN.FAILED"}, {""}} {
		if _, err := webhook.ParseEvents(bad); !errors.Is(err, webhook.ErrBadEvent) {
			t.Errorf("ParseEvents(%q) = %v, want ErrBadEvent", bad, err)
		}
	}
	for in, want := range map[string]webhook.Format{"": webhook.FormatStandard, "standard": webhook.FormatStandard, "slack": webhook.FormatSlack} {
		if got, err := webhook.ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"Slack", "json", " standard"} {
		if _, err := webhook.ParseFormat(bad); !errors.Is(err, webhook.ErrBadFormat) {
			t.Errorf("ParseFormat(%q) = %v, want ErrBadFormat", bad, err)
		}
	}
}

// Retries back off from seconds to hours and stop after a day.
func TestNextAttemptBacksOffAndGivesUp(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	now := created
	var gaps []time.Duration
	for attempts := 1; ; attempts++ {
		next, ok := webhook.NextAttempt(created, now, attempts)
		if !ok {
			if now.Add(webhook.MaxRetryInterval * 6 / 5).Before(created.Add(webhook.GiveUpAfter)) {
				t.Fatalf("gave up at %v after %d attempts, before a day had passed", now.Sub(created), attempts)
			}
			break
		}
		if next.After(created.Add(webhook.GiveUpAfter)) {
			t.Fatalf("attempt %d scheduled at %v, after the day", attempts+1, next.Sub(created))
		}
		gaps = append(gaps, next.Sub(now))
		now = next
		if attempts > 100 {
			t.Fatal("never gave up")
		}
	}
	if first := gaps[0]; first < webhook.FirstRetry || first > webhook.FirstRetry*6/5 {
		t.Errorf("first retry after %v, want %v plus at most a fifth", first, webhook.FirstRetry)
	}
	for i := 1; i < len(gaps); i++ {
		if gaps[i] > webhook.MaxRetryInterval*6/5 {
			t.Errorf("gap %d is %v, over the cap", i, gaps[i])
		}
	}
	if last := gaps[len(gaps)-1]; last < webhook.MaxRetryInterval {
		t.Errorf("last gap %v, want hours (the cap %v)", last, webhook.MaxRetryInterval)
	}
}

// The domain's list of events (leaseapi.WebhookEvents, which the stores
// and the API check names against) is this package's.
func TestEventsAgreeWithTheDomain(t *testing.T) {
	t.Parallel()
	var names []string
	for _, e := range webhook.Events {
		names = append(names, string(e))
	}
	if !slices.Equal(names, leaseapi.WebhookEvents) {
		t.Errorf("webhook.Events %q, leaseapi.WebhookEvents %q: want the same", names, leaseapi.WebhookEvents)
	}
	if string(webhook.FormatStandard) != leaseapi.WebhookFormatStandard || string(webhook.FormatSlack) != leaseapi.WebhookFormatSlack {
		t.Errorf("formats differ")
	}
}
