package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Message is one event as the outbox holds it: ID is the webhook-id, the
// same on every retry; Data is {"jobId","run","lease"} as written when the
// event was decided (job.missed: "missed" and "count" for "run";
// job.alerting and job.ok: also "reasons", and job.alerting "repeat").
type Message struct {
	ID        string
	Type      Event
	Timestamp time.Time
	Data      json.RawMessage
}

// StandardBody returns the Standard Webhooks body of m:
// {"type","timestamp","data"}.
func StandardBody(m Message) ([]byte, error) {
	b, err := json.Marshal(struct {
		Type      Event           `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}{m.Type, m.Timestamp.UTC(), m.Data})
	if err != nil {
		return nil, fmt.Errorf("webhook body of %s: %w", m.ID, err)
	}
	return b, nil
}

// slackData is what the Slack text needs of an event's data.
type slackData struct {
	JobID string `json:"jobId"`
	Run   *struct {
		Outcome string     `json:"outcome"`
		Tick    *time.Time `json:"tick"`
	} `json:"run"`
	Lease *struct {
		Tick *time.Time `json:"tick"`
	} `json:"lease"`
	Reasons []string `json:"reasons"`
	Repeat  bool     `json:"repeat"`
}

// plainJobID is what the console's job links leave unescaped.
var plainJobID = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// ConsoleJobURL returns the console page of a job under publicURL, the
// externally reachable base URL of leaseapi ("" when it is not configured).
func ConsoleJobURL(publicURL, jobID string) string {
	if publicURL == "" {
		return ""
	}
	id := jobID
	if !plainJobID.MatchString(id) {
		id = url.PathEscape(id)
	}
	return strings.TrimRight(publicURL, "/") + "/ui/#/jobs/" + id
}

// slackEscape escapes the three characters Slack's mrkdwn gives meaning to.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// SlackBody returns a Slack incoming-webhook body {"text": ...} naming the
// job, the outcome, the tick and, when publicURL is set, a console link;
// for job.alerting and job.ok, a line that says whether the job is
// alerting and why ("job `x` is alerting: failures, missed").
func SlackBody(m Message, publicURL string) ([]byte, error) {
	var d slackData
	if err := json.Unmarshal(m.Data, &d); err != nil {
		return nil, fmt.Errorf("webhook slack body of %s: %w", m.ID, err)
	}
	var b strings.Builder
	if m.Type == JobAlerting || m.Type == JobOK {
		slackPolicyLine(&b, m.Type, &d)
	} else {
		slackRunLine(&b, m.Type, &d)
	}
	if link := ConsoleJobURL(publicURL, d.JobID); link != "" {
		fmt.Fprintf(&b, " <%s|open in the console>", link)
	}
	out, err := json.Marshal(map[string]string{"text": b.String()})
	if err != nil {
		return nil, fmt.Errorf("webhook slack body of %s: %w", m.ID, err)
	}
	return out, nil
}

// slackPolicyLine writes the text of a job.alerting or job.ok event.
func slackPolicyLine(b *strings.Builder, e Event, d *slackData) {
	fmt.Fprintf(b, "leaseapi: job `%s` ", slackEscape.Replace(d.JobID))
	reasons := make([]string, len(d.Reasons))
	for i, r := range d.Reasons {
		reasons[i] = slackEscape.Replace(strings.ReplaceAll(r, "_", " ")) // failure_rate: "failure rate"
	}
	switch {
	case e == JobOK:
		b.WriteString("is ok again")
		if len(reasons) > 0 {
			fmt.Fprintf(b, " (was alerting: %s)", strings.Join(reasons, ", "))
		}
		return
	case d.Repeat:
		b.WriteString("is still alerting")
	default:
		b.WriteString("is alerting")
	}
	if len(reasons) > 0 {
		fmt.Fprintf(b, ": %s", strings.Join(reasons, ", "))
	}
}

// slackRunLine writes the text of an event about a run.
func slackRunLine(b *strings.Builder, e Event, d *slackData) {
	fmt.Fprintf(b, "leaseapi %s: job `%s`", e, slackEscape.Replace(d.JobID))
	var tick *time.Time
	if d.Run != nil {
		if d.Run.Outcome != "" {
			fmt.Fprintf(b, ", outcome %s", slackEscape.Replace(d.Run.Outcome))
		}
		tick = d.Run.Tick
	}
	if tick == nil && d.Lease != nil {
		tick = d.Lease.Tick
	}
	if tick != nil {
		fmt.Fprintf(b, ", tick %s", tick.UTC().Format(time.RFC3339))
	}
}

// Result is the outcome of one delivery attempt: Status is the HTTP status
// (0 when no response came), Err what went wrong otherwise; Delivered when
// the receiver answered 2xx; TimedOut when the attempt ran out of time
// (the receiver did not answer within the client's timeout). The response
// body is read (so the connection can be reused) but never kept.
type Result struct {
	Delivered bool
	Status    int
	Err       string
	TimedOut  bool
}

// maxDrain bounds what is read of a response body before it is discarded.
const maxDrain = 64 << 10

// Deliver makes one attempt to POST m to target in format, signed with
// secret for the standard format (a Slack URL carries its own secret and
// gets no signature headers), with client (NewClient) and at most its
// timeout.
// The attempt's time is the webhook-timestamp.
func Deliver(ctx context.Context, client *http.Client, target, secret string, format Format, publicURL string, m Message, now time.Time) Result {
	var (
		body []byte
		err  error
	)
	if format == FormatSlack {
		body, err = SlackBody(m, publicURL)
	} else {
		body, err = StandardBody(m)
	}
	if err != nil {
		return Result{Err: err.Error()}
	}
	timeout := client.Timeout
	if timeout <= 0 {
		timeout = Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return Result{Err: "bad url"} // never the URL itself: it may be a secret
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "leaseapi-webhooks")
	if format != FormatSlack {
		sig, err := Sign(secret, m.ID, now, body)
		if err != nil {
			return Result{Err: err.Error()}
		}
		req.Header.Set(HeaderID, m.ID)
		req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(HeaderSignature, sig)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{Err: attemptError(err), TimedOut: timedOut(err)}
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	return Result{Delivered: resp.StatusCode >= 200 && resp.StatusCode < 300, Status: resp.StatusCode, TimedOut: timedOut(err)}
}

// timedOut reports an error of an attempt that ran out of time.
func timedOut(err error) bool {
	var ne net.Error
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout())
}

// attemptError describes a failed attempt without the URL (a *url.Error
// names it, and a Slack URL is a secret).
func attemptError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
