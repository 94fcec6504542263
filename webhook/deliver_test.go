package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/webhook"
)

type received struct {
	header http.Header
	body   []byte
}

// receiver records what it is sent and answers with status.
func receiver(t *testing.T, status int) (string, <-chan received) {
	t.Helper()
	got := make(chan received, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{r.Header.Clone(), b}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("a body nobody keeps"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/hook?team=a", got
}

var msg = webhook.Message{
	ID:        "evt_0123456789abcdef",
	Type:      webhook.RunFailed,
	Timestamp: time.Date(2026, 12, 2, 6, 0, 1, 0, time.UTC),
	Data:      json.RawMessage(`{"jobId":"team-a:nightly","run":{"token":7,"outcome":"failed","tick":"2026-12-02T06:00:00Z"},"lease":{"jobId":"team-a:nightly","token":7}}`),
}

func TestDeliverStandardIsSignedAndVerifiable(t *testing.T) {
	t.Parallel()
	url, got := receiver(t, http.StatusNoContent)
	secret, _ := webhook.NewSecret()
	client := webhook.NewClient(true, 0)
	now := time.Unix(1764655201, 0)
	for attempt := range 2 { // a retry carries the same webhook-id
		res := webhook.Deliver(context.Background(), client, url, secret, webhook.FormatStandard, "", msg, now.Add(time.Duration(attempt)*time.Minute))
		if !res.Delivered || res.Status != http.StatusNoContent || res.Err != "" {
			t.Fatalf("attempt %d: %+v", attempt, res)
		}
		r := <-got
		if id := r.header.Get("webhook-id"); id != msg.ID {
			t.Fatalf("webhook-id %q, want %q", id, msg.ID)
		}
		if err := webhook.Verify(secret, r.header.Get("webhook-id"), r.header.Get("webhook-timestamp"), r.header.Get("webhook-signature"), r.body); err != nil {
			t.Fatalf("attempt %d: the receiver cannot verify: %v (headers %v)", attempt, err, r.header)
		}
		var body struct {
			Type      string          `json:"type"`
			Timestamp time.Time       `json:"timestamp"`
			Data      json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil || body.Type != "run.failed" || !body.Timestamp.Equal(msg.Timestamp) || string(body.Data) != string(msg.Data) {
			t.Fatalf("body %s: %v", r.body, err)
		}
	}
}

func TestDeliverReportsFailures(t *testing.T) {
	t.Parallel()
	url, got := receiver(t, http.StatusInternalServerError)
	secret, _ := webhook.NewSecret()
	res := webhook.Deliver(context.Background(), webhook.NewClient(true, 0), url, secret, webhook.FormatStandard, "", msg, time.Now())
	<-got
	if res.Delivered || res.Status != http.StatusInternalServerError {
		t.Fatalf("a 500: %+v, want not delivered with the status", res)
	}
	// A refused target: an error that does not repeat the URL (it may be
	// a secret).
	res = webhook.Deliver(context.Background(), webhook.NewClient(false, 0), url, secret, webhook.FormatStandard, "", msg, time.Now())
	if res.Delivered || res.Status != 0 || res.Err == "" || strings.Contains(res.Err, "/hook") || strings.Contains(res.Err, "team=a") {
		t.Fatalf("a refused dial: %+v", res)
	}
	if len(got) != 0 {
		t.Fatal("the refused target was reached")
	}
}

func TestDeliverSlack(t *testing.T) {
	t.Parallel()
	url, got := receiver(t, http.StatusOK)
	res := webhook.Deliver(context.Background(), webhook.NewClient(true, 0), url, "", webhook.FormatSlack, "https://leaseapi.example.com/", msg, time.Now())
	if !res.Delivered {
		t.Fatalf("%+v", res)
	}
	r := <-got
	if r.header.Get("webhook-signature") != "" {
		t.Error("a Slack delivery carries a signature header")
	}
	var body map[string]string
	if err := json.Unmarshal(r.body, &body); err != nil || len(body) != 1 {
		t.Fatalf("body %s: %v", r.body, err)
	}
	text := body["text"]
	for _, want := range []string{"run.failed", "`team-a:nightly`", "outcome failed", "tick 2026-12-02T06:00:00Z",
		"<https://leaseapi.example.com/ui/#/jobs/team-a:nightly|open in the console>"} {
		if !strings.Contains(text, want) {
			t.Errorf("text %q lacks %q", text, want)
		}
	}
}

func TestSlackBodyEscapesAndOmitsLinkWithoutPublicURL(t *testing.T) {
	t.Parallel()
	m := msg
	m.Data = json.RawMessage(`{"jobId":"a<b>&c","lease":{"tick":"2026-12-02T06:00:00+01:00"}}`)
	b, err := webhook.SlackBody(m, "")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	_ = json.Unmarshal(b, &body)
	if text := body["text"]; !strings.Contains(text, "a&lt;b&gt;&amp;c") || strings.Contains(text, "<") || !strings.Contains(text, "tick 2026-12-02T05:00:00Z") {
		t.Fatalf("text %q", text)
	}
	if got := webhook.ConsoleJobURL("http://x", "a b"); got != "http://x/ui/#/jobs/a%20b" {
		t.Errorf("ConsoleJobURL = %q", got)
	}
}

// An attempt the receiver does not answer within the client's timeout ends
// at it and says so.
func TestDeliverTimesOut(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client leave
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	msg := webhook.Message{ID: "msg_1", Type: "run.failed", Timestamp: time.Now(), Data: []byte(`{}`)}
	res := webhook.Deliver(context.Background(), webhook.NewClient(true, 50*time.Millisecond), srv.URL, "whsec_MDEyMzQ1Njc4OWFiY2RlZg==", webhook.FormatStandard, "", msg, time.Now())
	if res.Delivered || !res.TimedOut || res.Status != 0 {
		t.Fatalf("Deliver to a receiver that never answers: %+v, want timed out", res)
	}
}

// The Slack text of job.alerting and job.ok is a line a person reads: the
// job, alerting or ok again, and why.
func TestSlackBodyOfPolicyEvents(t *testing.T) {
	t.Parallel()
	lease := `"lease":{"jobId":"team-a:nightly","tick":"2026-12-02T06:00:00Z"}`
	for _, tt := range []struct {
		event webhook.Event
		data  string
		want  string
	}{
		{webhook.JobAlerting, `{"jobId":"team-a:nightly",` + lease + `,"reasons":["failures","missed"],"repeat":false}`,
			"leaseapi: job `team-a:nightly` is alerting: failures, missed <https://x/ui/#/jobs/team-a:nightly|open in the console>"},
		{webhook.JobAlerting, `{"jobId":"team-a:nightly","run":{"outcome":"failed"},` + lease + `,"reasons":["failure_rate","runtime_exceeded"],"repeat":true}`,
			"leaseapi: job `team-a:nightly` is still alerting: failure rate, runtime exceeded <https://x/ui/#/jobs/team-a:nightly|open in the console>"},
		{webhook.JobOK, `{"jobId":"team-a:nightly",` + lease + `,"reasons":["runtime_too_short"]}`,
			"leaseapi: job `team-a:nightly` is ok again (was alerting: runtime too short) <https://x/ui/#/jobs/team-a:nightly|open in the console>"},
		{webhook.JobOK, `{"jobId":"a<b>",` + lease + `,"reasons":[]}`,
			"leaseapi: job `a&lt;b&gt;` is ok again <https://x/ui/#/jobs/a%3Cb%3E|open in the console>"},
		{webhook.JobAlerting, `{"jobId":"j",` + lease + `,"reasons":["<!channel>"]}`,
			"leaseapi: job `j` is alerting: &lt;!channel&gt; <https://x/ui/#/jobs/j|open in the console>"},
	} {
		m := webhook.Message{ID: "evt_1", Type: tt.event, Timestamp: time.Now(), Data: json.RawMessage(tt.data)}
		b, err := webhook.SlackBody(m, "https://x")
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		if err := json.Unmarshal(b, &body); err != nil || len(body) != 1 {
			t.Fatalf("body %s: %v", b, err)
		}
		if body["text"] != tt.want {
			t.Errorf("%s %s:\n got %q\nwant %q", tt.event, tt.data, body["text"], tt.want)
		}
	}
}
