package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The tests in this file read the README and the guides in docs/ (their
// conventions are described in docs/README.md), so that what they show stays
// what leaseapi does.

// docFiles are the Markdown pages the tests read: the README and every guide,
// as paths relative to this package.
func docFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(guides) == 0 {
		t.Fatal("no guide found in ../../docs")
	}
	return append([]string{"../../README.md"}, guides...)
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDocsContentLengths: every response a page shows with `curl -i`
// announces the Content-Length of the body it shows.
func TestDocsContentLengths(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, path := range docFiles(t) {
		sc := bufio.NewScanner(strings.NewReader(readDoc(t, path)))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !strings.HasPrefix(sc.Text(), "HTTP/1.1 ") {
				continue
			}
			// The header lines up to the empty line, then the body's one line.
			length := -1
			for sc.Scan() && sc.Text() != "" {
				if v, ok := strings.CutPrefix(sc.Text(), "Content-Length: "); ok {
					n, err := strconv.Atoi(v)
					if err != nil {
						t.Fatalf("%s: Content-Length %q", path, v)
					}
					length = n
				}
			}
			if !sc.Scan() || length < 0 {
				continue
			}
			if body := sc.Text(); len(body) != length {
				t.Errorf("%s shows Content-Length: %d for a body of %d bytes: %.60s…", path, length, len(body), body)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("no response with a Content-Length found in the docs")
	}
}

// docCommand is one shell command a page shows, with the output shown after
// it (empty when none is shown).
type docCommand struct {
	line   int // of the command in its page
	cmd    string
	output string
}

// notRun is the comment that, on the line before a fence, keeps its block
// from being run (docs/README.md).
const notRun = "<!-- not run -->"

// docCommands extracts the commands of a page's fenced ```sh and ```console
// blocks, except those marked notRun. In a console block a command starts
// with "$ " and the lines up to the next command are its output; in an sh
// block every line is a command. A line ending in a backslash continues on
// the next.
func docCommands(doc string) ([]docCommand, error) {
	var cmds []docCommand
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		fence, info, ok := openFence(lines[i])
		if !ok {
			continue
		}
		skip := i > 0 && strings.TrimSpace(lines[i-1]) == notRun
		start := i
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != fence; i++ {
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: fence %s never closed", start+1, fence)
		}
		if skip || (info != "sh" && info != "console") {
			continue
		}
		block := lines[start+1 : i]
		for j := 0; j < len(block); j++ {
			text := block[j]
			if info == "console" {
				var ok bool
				if text, ok = strings.CutPrefix(text, "$ "); !ok {
					continue // output of the previous command
				}
			}
			if strings.TrimSpace(text) == "" {
				continue
			}
			c := docCommand{line: start + 2 + j}
			for strings.HasSuffix(text, `\`) && j+1 < len(block) {
				c.cmd += text + "\n"
				j++
				text = block[j]
			}
			c.cmd += text
			if info == "console" {
				var out []string
				for j+1 < len(block) && !strings.HasPrefix(block[j+1], "$ ") {
					j++
					out = append(out, block[j])
				}
				c.output = strings.TrimSpace(strings.Join(out, "\n"))
			}
			cmds = append(cmds, c)
		}
	}
	return cmds, nil
}

// openFence reports whether line opens a fenced code block (up to three
// spaces of indentation, as CommonMark allows), with its fence and the
// first word of its info string.
func openFence(line string) (fence, info string, ok bool) {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 {
		return "", "", false
	}
	n := len(trimmed) - len(strings.TrimLeft(trimmed, "`"))
	if n < 3 {
		return "", "", false
	}
	fields := strings.Fields(trimmed[n:])
	if len(fields) > 0 {
		info = fields[0]
	}
	return trimmed[:n], info, true
}

// TestDocCommandsExtraction pins what docCommands takes from a page.
func TestDocCommandsExtraction(t *testing.T) {
	t.Parallel()
	doc := strings.Join([]string{
		"```console",
		`$ curl -i --json '{}' \`,
		"  localhost:8080/a",
		"HTTP/1.1 409 Conflict",
		"",
		`{"code":"lease_held"}`,
		"$ sleep 0",
		"```",
		notRun,
		"```sh",
		"kubectl apply -k deploy",
		"```",
		"    ```sh",
		"    indented: not a fence",
		"    ```",
		"```sh",
		"make lint  # a comment",
		"",
		"```",
		"```text",
		"$ not a command",
		"```",
	}, "\n")
	got, err := docCommands(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []docCommand{
		{line: 2, cmd: "curl -i --json '{}' \\\n  localhost:8080/a", output: "HTTP/1.1 409 Conflict\n\n{\"code\":\"lease_held\"}"},
		{line: 7, cmd: "sleep 0"},
		{line: 17, cmd: "make lint  # a comment"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("docCommands() = %+v, want %+v", got, want)
	}
	if _, err := docCommands("```sh\nls\n"); err == nil {
		t.Error("docCommands(unclosed fence) = nil error, want one")
	}
}

// shownAddr is the address the pages' commands reach leaseapi at (`make run`).
const shownAddr = "localhost:8080"

// TestDocsCommands runs every command the README and the guides show,
// verbatim with bash but for the address, against a fresh leaseapi on the
// embedded store per page, in the page's order. Each must exit 0; where the
// page shows the answer, its status and its identifying fields must match.
func TestDocsCommands(t *testing.T) {
	t.Parallel()
	ran := 0
	for _, path := range docFiles(t) {
		cmds, err := docCommands(readDoc(t, path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(cmds) == 0 {
			continue
		}
		ran += len(cmds)
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			srv := startServe(t, serveConfig(t))
			addr := strings.TrimPrefix(srv.url, "http://")
			env := append(os.Environ(),
				// The commands reach a loopback server directly, whatever
				// proxy or curl configuration the machine has.
				"NO_PROXY=*", "no_proxy=*", "CURL_HOME="+t.TempDir())
			for _, c := range cmds {
				ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
				cmd := exec.CommandContext(ctx, "bash", "-c", strings.ReplaceAll(c.cmd, shownAddr, addr))
				cmd.Env = env
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				cancel()
				if err != nil {
					t.Fatalf("%s:%d: %s: %v\nstderr: %s\nserver log:\n%s", path, c.line, c.cmd, err, stderr.String(), srv.logs)
				}
				if msg := compareOutput(c.output, string(out)); msg != "" {
					t.Errorf("%s:%d: %s: %s\nshown:\n%s\ngot:\n%s", path, c.line, c.cmd, msg, c.output, out)
				}
			}
		})
	}
	if ran == 0 {
		t.Error("no command found in the docs")
	}
}

// shownFields are the fields of a JSON answer whose shown value must match
// what the command answers: what the answer says happened, without the
// times, which differ on every run, or the counters a background sweep
// may move meanwhile.
var shownFields = []string{"code", "status", "jobId", "owner", "token", "state", "tick", "outcome", "paused", "schedule", "trigger"}

// compareOutput compares the output a page shows with what the command
// printed: the HTTP status when a status line is shown, and the shownFields
// of a JSON body when one is shown. It returns what differs, or "".
func compareOutput(shown, got string) string {
	if shown == "" {
		return ""
	}
	shownStatus, shownBody := splitResponse(shown)
	gotStatus, gotBody := splitResponse(strings.TrimSpace(got))
	if shownStatus != "" && shownStatus != gotStatus {
		return fmt.Sprintf("status %q, the page shows %q", gotStatus, shownStatus)
	}
	if !strings.HasPrefix(shownBody, "{") {
		return ""
	}
	var want, have any
	if err := json.Unmarshal([]byte(shownBody), &want); err != nil {
		return fmt.Sprintf("the page shows a body that is not JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(gotBody), &have); err != nil {
		return fmt.Sprintf("the answer is not JSON: %v", err)
	}
	return compareFields("", want, have)
}

// splitResponse splits curl's output into the status code of its status line
// (with -i) and the body.
func splitResponse(out string) (status, body string) {
	out = strings.ReplaceAll(out, "\r\n", "\n")
	if !strings.HasPrefix(out, "HTTP/") {
		return "", out
	}
	head, body, _ := strings.Cut(out, "\n\n")
	if fields := strings.Fields(head); len(fields) > 1 {
		status = fields[1]
	}
	return status, strings.TrimSpace(body)
}

// compareFields walks the shown JSON value and the answer together and
// returns the first difference in a shownField, or "".
func compareFields(at string, want, have any) string {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: an object is shown, got %v", at, have)
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if slices.Contains(shownFields, k) && !reflect.DeepEqual(w[k], h[k]) {
				return fmt.Sprintf("%s.%s = %v, the page shows %v", at, k, h[k], w[k])
			}
			if msg := compareFields(at+"."+k, w[k], h[k]); msg != "" {
				return msg
			}
		}
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return fmt.Sprintf("%s: %d items shown, got %v", at, len(w), have)
		}
		for i := range w {
			if msg := compareFields(fmt.Sprintf("%s[%d]", at, i), w[i], h[i]); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// TestCompareOutput: a shown answer that differs in status or in a
// shownField is reported; times and counters may differ.
func TestCompareOutput(t *testing.T) {
	t.Parallel()
	shown := "HTTP/1.1 409 Conflict\nContent-Type: application/problem+json\n\n" +
		`{"code":"lease_held","lease":{"token":1,"expiresAt":"2026-12-01T07:05:33.603Z","missedTicks":0}}`
	for _, tc := range []struct {
		name, got string
		differs   bool
	}{
		{"Same", "HTTP/1.1 409 Conflict\r\nX: y\r\n\r\n" + `{"code":"lease_held","lease":{"token":1,"expiresAt":"2027-01-01T00:00:00Z","missedTicks":3}}`, false},
		{"OtherStatus", "HTTP/1.1 200 OK\r\n\r\n" + `{"code":"lease_held","lease":{"token":1}}`, true},
		{"OtherCode", "HTTP/1.1 409 Conflict\r\n\r\n" + `{"code":"tick_done","lease":{"token":1}}`, true},
		{"OtherNestedToken", "HTTP/1.1 409 Conflict\r\n\r\n" + `{"code":"lease_held","lease":{"token":2}}`, true},
		{"NotJSON", "HTTP/1.1 409 Conflict\r\n\r\nnope", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if msg := compareOutput(shown, tc.got); (msg != "") != tc.differs {
				t.Errorf("compareOutput() = %q, want a difference: %v", msg, tc.differs)
			}
		})
	}
	if msg := compareOutput(`{"runs":[{"outcome":"running"},{"outcome":"expired"}]}`, `{"runs":[{"outcome":"running"}]}`); msg == "" {
		t.Error("compareOutput() of a shorter list = \"\", want a difference")
	}
}

// mdLink matches an inline Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks: every relative link of the README and the guides names a
// file of the repository, and every #fragment a heading of its page.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	anchors := map[string][]string{} // page → its headings' anchors
	anchorsOf := func(path string) []string {
		if a, ok := anchors[path]; ok {
			return a
		}
		for line := range strings.Lines(readDoc(t, path)) {
			if h, ok := strings.CutPrefix(line, "#"); ok {
				anchors[path] = append(anchors[path], headingAnchor(strings.TrimLeft(h, "#")))
			}
		}
		return anchors[path]
	}
	for _, path := range docFiles(t) {
		inFence := false
		for i, line := range strings.Split(readDoc(t, path), "\n") {
			if _, _, ok := openFence(line); ok {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, fragment, _ := strings.Cut(target, "#")
				page := path
				if file != "" {
					page = filepath.Join(filepath.Dir(path), file)
					if _, err := os.Stat(page); err != nil {
						t.Errorf("%s:%d: link %s: %v", path, i+1, target, err)
						continue
					}
				}
				if fragment != "" && (!strings.HasSuffix(page, ".md") || !slices.Contains(anchorsOf(page), fragment)) {
					t.Errorf("%s:%d: link %s: no heading with that anchor in %s", path, i+1, target, page)
				}
			}
		}
	}
}

// headingAnchor is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, other punctuation dropped.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
