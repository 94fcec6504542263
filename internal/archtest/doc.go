// Package archtest holds no code: its test enforces the import directions of
// docs/architecture.md (handlers never reach the database, repo never speaks HTTP,
// the root package is stdlib-only, the test harness never ships) with
// `go list`, so that `go test ./...` and `make lint` fail on a wrong import.
package archtest
