package handlers

import (
	"encoding/base64"

	"github.com/leaseapi/leaseapi"
)

// cursorEncoding is unpadded base64url that refuses non-canonical input, so
// every page has exactly one cursor.
var cursorEncoding = base64.RawURLEncoding.Strict()

// encodeCursor is the opaque cursor of the page after jobID.
func encodeCursor(jobID string) string {
	return cursorEncoding.EncodeToString([]byte(jobID))
}

// decodeCursor returns the job id a cursor encodes.
func decodeCursor(cursor string) (string, error) {
	b, err := cursorEncoding.DecodeString(cursor)
	if err != nil || !leaseapi.ValidJobID(string(b)) {
		return "", invalidf("cursor is not valid; pass the nextCursor of the previous page unchanged")
	}
	return string(b), nil
}
