// Package ui is the operations console: static files (HTML, CSS and
// JavaScript modules, no build step) embedded in the binary, and the
// http.Handler that serves them. The console is one more client of the
// public API; everything it shows it reads with the caller's bearer token,
// so the files themselves need no credential.
//
// Every file is prepared once at start: its content type, a gzip copy when
// that is smaller, and an ETag from its SHA-256. Every answer says
// Cache-Control: no-cache: the file names carry no version, so a browser
// revalidates each one (a 304 costs a few hundred bytes) and never runs
// the JavaScript of an older build against a newer API.
package ui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// ContentSecurityPolicy allows the console's own files and nothing else: no
// inline script or style, no eval, no framing, data: images only for the
// favicon, and fetches to this origin only (the API).
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"

// SetSecurityHeaders sets the headers every console answer carries,
// the redirect to it and its 404s included.
func SetSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// file is one prepared asset.
type file struct {
	contentType string
	body, gz    []byte // gz is nil when compressing does not pay
	etag        string // strong, of body; the gzip copy's ends in -gz
}

// files are the assets by their path under Prefix ("" is index.html).
var files = mustLoad()

func mustLoad() map[string]*file {
	m, err := load(static)
	if err != nil {
		panic("ui: " + err.Error()) // the embedded files are part of the build
	}
	return m
}

func load(fsys fs.FS) (map[string]*file, error) {
	sub, err := fs.Sub(fsys, "static")
	if err != nil {
		return nil, err
	}
	m := make(map[string]*file)
	err = fs.WalkDir(sub, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(sub, name)
		if err != nil {
			return err
		}
		ct := contentType(name)
		if ct == "" {
			return fmt.Errorf("%s: no content type for its extension", name)
		}
		sum := sha256.Sum256(body)
		f := &file{contentType: ct, body: body, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(body)
		_ = zw.Close()
		if buf.Len() < len(body)*9/10 {
			f.gz = buf.Bytes()
		}
		m[name] = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	if m["index.html"] == nil {
		return nil, fmt.Errorf("no index.html")
	}
	m[""] = m["index.html"]
	return m, nil
}

// contentType is the type of an asset by its extension; a few are fixed
// here because the system's MIME table may lack them or disagree
// (JavaScript modules must be served as JavaScript, or the browser refuses
// to run them under nosniff).
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	}
	return mime.TypeByExtension(path.Ext(name))
}

// Handler serves the console's files at Prefix. A path that names no file
// is handed to notFound (the API's 404 problem); every answer carries the
// security headers.
func Handler(notFound http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetSecurityHeaders(w.Header())
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		f := files[name]
		if !ok || f == nil {
			notFound.ServeHTTP(w, r)
			return
		}
		serve(w, r, f)
	})
}

// Redirect answers with a redirect to the console.
func Redirect(w http.ResponseWriter, r *http.Request) {
	SetSecurityHeaders(w.Header())
	http.Redirect(w, r, Prefix, http.StatusFound)
}

func serve(w http.ResponseWriter, r *http.Request, f *file) {
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Cache-Control", "no-cache")
	body, etag := f.body, f.etag
	if f.gz != nil {
		h.Set("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			body, etag = f.gz, strings.TrimSuffix(f.etag, `"`)+`-gz"`
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("ETag", etag)
	if matchETag(r.Header.Get("If-None-Match"), etag) {
		h.Del("Content-Type")
		h.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reports whether an Accept-Encoding value allows gzip (a
// q=0 refuses it).
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q, found := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
		if !found {
			return true
		}
		v, err := strconv.ParseFloat(q, 64)
		return err == nil && v > 0
	}
	return false
}

// matchETag reports whether an If-None-Match value names etag (or is *).
func matchETag(header, etag string) bool {
	for part := range strings.SplitSeq(header, ",") {
		part = strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if part == etag || part == "*" {
			return true
		}
	}
	return false
}
