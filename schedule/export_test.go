package schedule

// Anchored reports whether s is anchored to the wall clock (cron(8)'s rule
// for daylight-saving changes applies to it).
func Anchored(s *Schedule) bool { return s.cron != nil && s.cron.anchored }
