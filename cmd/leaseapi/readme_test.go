package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestREADMEContentLengths: every response the README shows with
// `curl -i` announces the Content-Length of the body it shows.
func TestREADMEContentLengths(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(readme)))
	sc.Buffer(nil, 1<<20)
	checked := 0
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "HTTP/1.1 ") {
			continue
		}
		// The header lines up to the empty line, then the body's one line.
		length := -1
		for sc.Scan() && sc.Text() != "" {
			if v, ok := strings.CutPrefix(sc.Text(), "Content-Length: "); ok {
				if length, err = strconv.Atoi(v); err != nil {
					t.Fatalf("Content-Length %q", v)
				}
			}
		}
		if !sc.Scan() || length < 0 {
			continue
		}
		if body := sc.Text(); len(body) != length {
			t.Errorf("README shows Content-Length: %d for a body of %d bytes: %.60s…", length, len(body), body)
		}
		checked++
	}
	if checked == 0 {
		t.Error("no response with a Content-Length found in README.md")
	}
}
