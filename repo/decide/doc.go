// Package decide holds the decisions both lease stores make the same way,
// as pure functions of what a store read: whether an
// acquire renews, grants or is refused (Acquire), which tick of the job's
// schedule it is for (ResolveTick), and the fate of a scheduled job's due
// ticks (PlanTicks, Ticks). The stores differ in how
// they read and write rows; what they decide from the rows is said once,
// here, and the acquire coalescer (repo.CoalesceAcquires) answers its
// followers with the same function.
//
// An acquire is decided whole here (PlanAcquire): the refusal, or the
// complete write (the lease's new columns, the run to start, the expired
// run to close) and the instant until which the decision holds. Each store
// only reads the row with its clock and writes the plan conditionally.
package decide
