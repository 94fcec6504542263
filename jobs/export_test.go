package jobs

// QueuedAcquires is how many acquires of r wait for the batch in flight to
// return: a test holds a call at the server and waits for the others to
// queue behind it, so that it knows the next batch.
func QueuedAcquires(r *Runner) int { return queued(r.acquires) }

// QueuedHeartbeats is QueuedAcquires for heartbeats.
func QueuedHeartbeats(r *Runner) int { return queued(r.heartbeats) }

func queued[P any](b *batched[P]) int { return b.batcher.Queued() }
