package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedUpToDate regenerates the client into a temporary directory
// as `make generate` does (internal/generate: the pinned generator, a tool
// dependency in go.mod, so it needs no network once the module cache holds
// it) and fails when client.gen.go differs: a change to api/openapi.yaml
// must come with `make generate`.
func TestGeneratedUpToDate(t *testing.T) {
	t.Parallel()

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("look up the go command: %v", err)
	}
	out := filepath.Join(t.TempDir(), "client.gen.go")
	cmd := exec.Command(goBin, "run", "./internal/generate", "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/generate: %v\n%s", err, msg)
	}

	got, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatalf("read committed client: %v", err)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("read regenerated client: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("api/client/client.gen.go is stale (%d bytes, regenerated %d): run `make generate` and commit it", len(got), len(want))
	}
}
