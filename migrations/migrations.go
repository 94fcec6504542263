// Package migrations holds the database schemas as forward-only SQL files,
// embedded in the binary and applied with goose.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Postgres returns the migrations of the Postgres store.
func Postgres() fs.FS { return sub("postgres") }

// SQLite returns the migrations of the embedded SQLite store.
func SQLite() fs.FS { return sub("sqlite") }

func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return f
}
