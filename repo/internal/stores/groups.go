package stores

import (
	"time"

	"github.com/leaseapi/leaseapi/repo/decide"
)

// MarkGroupFull sets GroupFull on each missed run of a job in a group whose
// group had every slot in use when the run's grace ended
// (decide.GroupFullAt); groupAt reads the group's limit and its grants
// around an instant (ok false: the group is gone).
func MarkGroupFull(missed []decide.MissedRun, groupAt func(at time.Time) (limit int, runs []decide.GroupRun, ok bool, err error)) error {
	for i := range missed {
		limit, runs, ok, err := groupAt(missed[i].EndedAt)
		if err != nil {
			return err
		}
		missed[i].GroupFull = ok && decide.GroupFullAt(limit, runs, missed[i].EndedAt)
	}
	return nil
}
