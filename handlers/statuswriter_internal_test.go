package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStatusWriter: the status and size recorded, the second WriteHeader
// dropped, a body without WriteHeader answered 200, and flushing reaching
// the server's writer.
func TestStatusWriter(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	w := &statusWriter{ResponseWriter: rec}
	if w.Status() != 0 {
		t.Fatalf("status %d before any, want 0", w.Status())
	}
	w.WriteHeader(http.StatusConflict)
	w.WriteHeader(http.StatusInternalServerError)
	if _, err := w.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if n, err := w.ReadFrom(strings.NewReader("de")); n != 2 || err != nil {
		t.Fatalf("ReadFrom: %d, %v", n, err)
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if w.Status() != http.StatusConflict || rec.Code != http.StatusConflict || w.BytesWritten() != 5 || rec.Body.String() != "abcde" || !rec.Flushed {
		t.Fatalf("status %d (recorded %d), %d bytes %q, flushed %v", w.Status(), rec.Code, w.BytesWritten(), rec.Body, rec.Flushed)
	}

	rec = httptest.NewRecorder()
	w = &statusWriter{ResponseWriter: rec}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if w.Status() != http.StatusOK || rec.Code != http.StatusOK {
		t.Fatalf("status %d (recorded %d) after a bare Write, want 200", w.Status(), rec.Code)
	}
}
