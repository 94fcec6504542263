package handlers

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/leaseapi/leaseapi"
)

// cursorEncoding is unpadded base64url that refuses non-canonical trailing
// bits. (It still skips CR and LF, as every Go base64 decoder does, so the
// decoders below also compare the cursor with its re-encoding: every page
// has exactly one cursor.)
var cursorEncoding = base64.RawURLEncoding.Strict()

// encodeCursor is the opaque cursor of the page after jobID.
func encodeCursor(jobID string) string {
	return cursorEncoding.EncodeToString([]byte(jobID))
}

// decodeCursor returns the job id a cursor encodes.
func decodeCursor(cursor string) (string, error) {
	b, err := cursorEncoding.DecodeString(cursor)
	if err != nil || !leaseapi.ValidJobID(string(b)) || encodeCursor(string(b)) != cursor {
		return "", invalidf("cursor is not valid; pass the nextCursor of the previous page unchanged")
	}
	return string(b), nil
}

// encodeRunCursor is the opaque cursor of the page of runs after k: its
// time in Unix microseconds (the finer of the stores' precisions) and its
// id.
func encodeRunCursor(k leaseapi.RunKey) string {
	return cursorEncoding.EncodeToString([]byte(strconv.FormatInt(k.At.UnixMicro(), 10) + "." + strconv.FormatInt(k.ID, 10)))
}

// decodeRunCursor returns the run key a cursor of GET /runs encodes. Only
// the canonical form is accepted, so every page has exactly one cursor.
func decodeRunCursor(cursor string) (*leaseapi.RunKey, error) {
	bad := invalidf("cursor is not valid; pass the nextCursor of the previous page of GET /runs unchanged")
	b, err := cursorEncoding.DecodeString(cursor)
	if err != nil {
		return nil, bad
	}
	at, id, ok := strings.Cut(string(b), ".")
	micros, err1 := strconv.ParseInt(at, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || err1 != nil || err2 != nil || n < 1 {
		return nil, bad
	}
	k := &leaseapi.RunKey{At: time.UnixMicro(micros).UTC(), ID: n}
	if !leaseapi.ValidTick(k.At) || encodeRunCursor(*k) != cursor {
		return nil, bad
	}
	return k, nil
}
