package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/internal/version"
)

// An instance records itself in the database every instanceInterval, and
// reads the feature level finalized there; one not seen for instanceLive
// (three missed records) no longer counts as live, so one that was killed
// holds up a finalize for at most that long.
const (
	instanceInterval = 10 * time.Second
	instanceLive     = 3 * instanceInterval
	// instanceTimeout bounds one record and the last forget.
	instanceTimeout = 5 * time.Second
)

// instanceRecorder keeps this process's record in the database and the
// gate at the level finalized there.
type instanceRecorder struct {
	registry leaseapi.Registry
	self     leaseapi.Instance
	gate     *leaseapi.Gate
	interval time.Duration
	logger   *slog.Logger
}

// startInstance records this process in the registry and returns the gate
// at the database's finalized level, and the loop that keeps both. It
// refuses to serve a database finalized above this build's level: that
// database may hold state this build does not know the rules of (a
// rollback past a finalized upgrade).
func startInstance(ctx context.Context, r leaseapi.Registry, startTimeout time.Duration, logger *slog.Logger) (*leaseapi.Gate, *instanceRecorder, error) {
	id := make([]byte, 8)
	_, _ = rand.Read(id) // never fails (crypto/rand)
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	rec := &instanceRecorder{
		registry: r,
		self: leaseapi.Instance{ID: hex.EncodeToString(id), Host: truncate(host, 255),
			Version: truncate(version.Get().Version, 255), Level: leaseapi.FeatureLevel},
		gate:     &leaseapi.Gate{},
		interval: instanceInterval,
		logger:   logger,
	}
	var level int
	err = retryUnavailable(ctx, "record instance", startTimeout, logger, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, instanceTimeout)
		defer cancel()
		var err error
		level, err = r.RecordInstance(ctx, rec.self)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if level > leaseapi.FeatureLevel {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), instanceTimeout)
		defer cancel()
		return nil, nil, errors.Join(tooNew(level), r.ForgetInstance(ctx, rec.self.ID))
	}
	rec.gate.Set(level)
	logger.Info("instance recorded", slog.String("instance", rec.self.ID), slog.String("version", rec.self.Version),
		slog.Int("feature_level", leaseapi.FeatureLevel), slog.Int("finalized_level", level))
	return rec.gate, rec, nil
}

func tooNew(level int) error {
	return fmt.Errorf("the database is finalized at feature level %d, above this build's %d (version %s): "+
		"it was upgraded to a newer release and finalized, so this release cannot serve it; run that release or a later one",
		level, leaseapi.FeatureLevel, version.Get().Version)
}

// Run records the instance every interval until ctx ends, then deletes its
// record, so that a finalize right after a clean shutdown does not wait
// for it to go stale.
func (rec *instanceRecorder) Run(ctx context.Context) {
	t := time.NewTicker(rec.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), instanceTimeout)
			defer cancel()
			if err := rec.registry.ForgetInstance(fctx, rec.self.ID); err != nil {
				rec.logger.Warn("deleting this instance's record failed; it goes stale by itself",
					slog.String("instance", rec.self.ID), slog.Any("error", err))
			}
			return
		case <-t.C:
			rec.record(ctx)
		}
	}
}

func (rec *instanceRecorder) record(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, instanceTimeout)
	defer cancel()
	level, err := rec.registry.RecordInstance(ctx, rec.self)
	if err != nil {
		rec.logger.Warn("recording this instance failed", slog.String("instance", rec.self.ID), slog.Any("error", err))
		return
	}
	if level > leaseapi.FeatureLevel {
		// Finalize checked that no live instance was older; this one was
		// not seen in time (a pause, a partition). It keeps serving the
		// rules it knows, and says so.
		rec.logger.Error("the database was finalized above this build's feature level; replace this instance with the newer release",
			slog.String("instance", rec.self.ID), slog.Any("error", tooNew(level)))
		return
	}
	if level != rec.gate.Level() {
		rec.logger.Info("feature level finalized", slog.Int("from", rec.gate.Level()), slog.Int("to", level))
	}
	rec.gate.Set(level)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// upgrade runs `leaseapi upgrade status|finalize` on the database.
func upgrade(ctx context.Context, cfg Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) != 1 || (args[0] != "status" && args[0] != "finalize") {
		return fmt.Errorf("upgrade needs status or finalize, got %q (see leaseapi -h)", args)
	}
	s, err := openStore(ctx, cfg, logger, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout+instanceTimeout)
	defer cancel()
	if args[0] == "status" {
		err = upgradeStatus(ctx, s, stdout)
	} else {
		err = upgradeFinalize(ctx, s, stdout)
	}
	return errors.Join(err, s.Close())
}

func upgradeStatus(ctx context.Context, r leaseapi.Registry, w io.Writer) error {
	list, level, err := r.Instances(ctx, instanceLive)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "finalized feature level: %d (this build: %d, version %s)\n", level, leaseapi.FeatureLevel, version.Get().Version)
	fmt.Fprintf(w, "live instances (seen in the last %s; v1.0.0 instances do not record themselves):\n", instanceLive)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOST\tVERSION\tLEVEL\tSTARTED\tSEEN")
	for _, in := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", in.ID, in.Host, in.Version, in.Level,
			in.StartedAt.Format(time.RFC3339), in.SeenAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func upgradeFinalize(ctx context.Context, r leaseapi.Registry, w io.Writer) error {
	if err := r.Finalize(ctx, leaseapi.FeatureLevel, instanceLive); err != nil {
		return err
	}
	_, level, err := r.Instances(ctx, instanceLive)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "finalized at feature level %d; every instance turns its features on within %s\n", level, instanceInterval)
	return err
}
