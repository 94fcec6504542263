// Package decide holds the decisions both lease stores make the same way,
// as pure functions of what a store read under its lock: whether an
// acquire renews, grants or is refused (Acquire), which tick of the job's
// schedule it is for (ResolveTick), and the fate of a scheduled job's due
// ticks (PlanTicks, Ticks). The stores differ in how
// they read and write rows; what they decide from the rows is said once,
// here, and the acquire coalescer (repo.CoalesceAcquires) answers its
// followers with the same function.
//
// The Postgres store also decides an acquire in SQL, in one statement under
// the row lock (repo/postgres); this package is the Go statement of the same
// rules, which the Postgres store uses to name the conflict of a refusal.
package decide
