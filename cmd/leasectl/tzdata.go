package main

// The zone database built into the binary: CRON_TZ= zones and the host's
// zone load on hosts and in images without /usr/share/zoneinfo, so ticks
// in local time are computed there as everywhere else. A host's own zone
// database, when it has one, is read first.
import _ "time/tzdata"
