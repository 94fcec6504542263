package jobs_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/jobs"
)

// Every replica of a cron Deployment runs the same code; each tick of
// "nightly-report" runs on exactly one of them. The example is compiled, not
// run: it needs a leaseapi at LEASEAPI_URL.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	c, err := client.NewClientWithResponses(os.Getenv("LEASEAPI_URL"), client.WithBearerToken(os.Getenv("LEASEAPI_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	pod, _ := os.Hostname() // the pod name: unique per replica
	runner, err := jobs.New(jobs.Config{Client: c, Owner: pod})
	if err != nil {
		log.Fatal(err)
	}
	err = runner.Add("nightly-report", "CRON_TZ=Europe/Berlin 0 2 * * *", func(ctx context.Context) error {
		lease, _ := jobs.LeaseFromContext(ctx)
		return writeReport(ctx, lease.Token) // the sink rejects tokens older than the newest it saw
	}, jobs.MaxRunTime(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.Serve(ctx); err != nil { // until SIGTERM; then releases running jobs failed
		log.Fatal(err)
	}
}

func writeReport(ctx context.Context, fencingToken int64) error { return ctx.Err() }
