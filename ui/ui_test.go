package ui

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestNoMarkupFromData holds the console's code to the rules that keep
// data out of markup and the CSP meaningful: no HTML parsed from strings,
// no eval-like calls, no inline script, style or event handler in the page.
func TestNoMarkupFromData(t *testing.T) {
	t.Parallel()
	forbidden := map[string]*regexp.Regexp{
		"innerHTML/outerHTML":  regexp.MustCompile(`\b(inner|outer)HTML\b`),
		"insertAdjacentHTML":   regexp.MustCompile(`insertAdjacentHTML`),
		"document.write":       regexp.MustCompile(`document\.write`),
		"eval":                 regexp.MustCompile(`\beval\s*\(`),
		"new Function":         regexp.MustCompile(`new\s+Function\b`),
		"string timer":         regexp.MustCompile(`set(Timeout|Interval)\(\s*['"` + "`" + `]`),
		"DOMParser":            regexp.MustCompile(`DOMParser|createContextualFragment`),
		"javascript: URL":      regexp.MustCompile(`javascript:`),
		"a cookie":             regexp.MustCompile(`document\.cookie`),
		"credentials included": regexp.MustCompile(`credentials:\s*'include'`),
	}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(sub, "*")
	if err != nil {
		t.Fatal(err)
	}
	var scripts int
	for _, name := range names {
		body, err := fs.ReadFile(sub, name)
		if err != nil {
			t.Fatal(err)
		}
		text := string(body)
		for what, re := range forbidden {
			if loc := re.FindStringIndex(text); loc != nil {
				t.Errorf("%s: %s at byte %d", name, what, loc[0])
			}
		}
		if strings.HasSuffix(name, ".js") {
			scripts++
		}
		if name != "index.html" {
			continue
		}
		for _, tag := range regexp.MustCompile(`(?is)<script\b[^>]*>(.*?)</script>`).FindAllStringSubmatch(text, -1) {
			if !strings.Contains(tag[0], ` src="`) || strings.TrimSpace(tag[1]) != "" {
				t.Errorf("index.html: inline script %q", tag[0])
			}
		}
		for _, re := range []*regexp.Regexp{regexp.MustCompile(`(?i)<style\b`), regexp.MustCompile(`(?i)\sstyle=`), regexp.MustCompile(`(?i)\son[a-z]+=`)} {
			if m := re.FindString(text); m != "" {
				t.Errorf("index.html: inline %q (the CSP forbids it)", m)
			}
		}
	}
	if scripts < 3 {
		t.Errorf("found %d scripts in %v; the check looked at the wrong files", scripts, names)
	}
}

// TestLoad: every embedded file has a content type and an ETag, index.html
// is also served at the prefix itself, and the gzip copy exists only where
// it is smaller.
func TestLoad(t *testing.T) {
	t.Parallel()
	m, err := load(static)
	if err != nil {
		t.Fatal(err)
	}
	if m[""] != m["index.html"] || m[""] == nil {
		t.Fatalf("the prefix does not serve index.html")
	}
	for name, f := range m {
		if f.contentType == "" || f.etag == "" {
			t.Errorf("%s: content type %q, etag %q", name, f.contentType, f.etag)
		}
		if f.gz != nil && len(f.gz) >= len(f.body) {
			t.Errorf("%s: gzip copy of %d bytes for %d", name, len(f.gz), len(f.body))
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]bool{
		"": false, "gzip": true, "br, gzip": true, "GZIP;q=0.5": true, "gzip;q=0": false,
		"gzip; q=0.0": false, "deflate, br": false, "identity": false, "x-gzip": false,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}
