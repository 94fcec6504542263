package api

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The lease and the problem are the answers of every lease call, so they
// are encoded without reflection: AppendJSON writes what encoding/json
// writes for them, up to the escaping of <, > and & (left as they are;
// both are valid JSON). A differential fuzz test holds the two equal.

var (
	_ json.Marshaler = Lease{}
	_ json.Marshaler = Problem{}
)

// MarshalJSON encodes l as AppendJSON does.
func (l Lease) MarshalJSON() ([]byte, error) { return l.AppendJSON(make([]byte, 0, 384)), nil }

// AppendJSON appends l's JSON object to b.
func (l Lease) AppendJSON(b []byte) []byte {
	b = append(b, `{"jobId":`...)
	b = appendString(b, l.JobID)
	b = append(b, `,"owner":`...)
	b = appendString(b, l.Owner)
	b = append(b, `,"token":`...)
	b = strconv.AppendInt(b, l.Token, 10)
	b = append(b, `,"timeline":`...)
	if l.Timeline == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *l.Timeline, 10)
	}
	b = append(b, `,"state":`...)
	b = appendString(b, string(l.State))
	b = append(b, `,"acquiredAt":`...)
	b = l.AcquiredAt.appendJSON(b)
	b = append(b, `,"renewedAt":`...)
	b = l.RenewedAt.appendJSON(b)
	b = append(b, `,"expiresAt":`...)
	b = l.ExpiresAt.appendJSON(b)
	b = append(b, `,"releasedAt":`...)
	b = appendTimePtr(b, l.ReleasedAt)
	b = append(b, `,"ttlMs":`...)
	b = strconv.AppendInt(b, l.TTLMs, 10)
	b = append(b, `,"tick":`...)
	b = appendTimePtr(b, l.Tick)
	b = append(b, `,"lastCompletedTick":`...)
	b = appendTimePtr(b, l.LastCompletedTick)
	b = append(b, `,"lastOutcome":`...)
	if l.LastOutcome == nil {
		b = append(b, "null"...)
	} else {
		b = appendString(b, string(*l.LastOutcome))
	}
	b = append(b, `,"schedule":`...)
	b = appendStringPtr(b, l.Schedule)
	b = append(b, `,"graceMs":`...)
	if l.GraceMs == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *l.GraceMs, 10)
	}
	b = append(b, `,"nextTick":`...)
	b = appendTimePtr(b, l.NextTick)
	b = append(b, `,"paused":`...)
	b = strconv.AppendBool(b, l.Paused)
	b = append(b, `,"pausedAt":`...)
	b = appendTimePtr(b, l.PausedAt)
	b = append(b, `,"pausedBy":`...)
	b = appendStringPtr(b, l.PausedBy)
	b = append(b, `,"pausedReason":`...)
	b = appendStringPtr(b, l.PausedReason)
	b = append(b, `,"missedTicks":`...)
	b = strconv.AppendInt(b, l.MissedTicks, 10)
	b = append(b, `,"skippedTicks":`...)
	b = strconv.AppendInt(b, l.SkippedTicks, 10)
	b = append(b, `,"revokedBy":`...)
	b = appendStringPtr(b, l.RevokedBy)
	b = append(b, `,"catchUp":`...)
	b = appendString(b, string(l.CatchUp))
	b = append(b, `,"catchUpWindowMs":`...)
	b = strconv.AppendInt(b, l.CatchUpWindowMs, 10)
	b = append(b, `,"owedTick":`...)
	b = appendTimePtr(b, l.OwedTick)
	b = append(b, `,"owedReason":`...)
	if l.OwedReason == nil {
		b = append(b, "null"...)
	} else {
		b = appendString(b, string(*l.OwedReason))
	}
	b = append(b, `,"group":`...)
	b = appendStringPtr(b, l.Group)
	b = append(b, `,"slot":`...)
	b = appendInt64Ptr(b, l.Slot)
	b = append(b, `,"slotToken":`...)
	b = appendInt64Ptr(b, l.SlotToken)
	b = append(b, `,"alerting":`...)
	b = strconv.AppendBool(b, l.Alerting)
	if len(l.AlertReasons) > 0 {
		b = append(b, `,"alertReasons":[`...)
		for i, r := range l.AlertReasons {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, string(r))
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendInt64Ptr(b []byte, n *int64) []byte {
	if n == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, *n, 10)
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

// MarshalJSON encodes p as AppendJSON does.
func (p Problem) MarshalJSON() ([]byte, error) { return p.AppendJSON(make([]byte, 0, 640)), nil }

// AppendJSON appends p's JSON object to b; lease, now and group are left
// out when nil.
func (p Problem) AppendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, p.Type)
	b = append(b, `,"title":`...)
	b = appendString(b, p.Title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	b = append(b, `,"detail":`...)
	b = appendString(b, p.Detail)
	b = append(b, `,"code":`...)
	b = appendString(b, p.Code)
	if p.Lease != nil {
		b = append(b, `,"lease":`...)
		b = p.Lease.AppendJSON(b)
	}
	if p.Now != nil {
		b = append(b, `,"now":`...)
		b = p.Now.appendJSON(b)
	}
	if p.Group != nil {
		b = append(b, `,"group":`...)
		b = p.Group.appendJSON(b)
	}
	return append(b, '}')
}

func appendTimePtr(b []byte, t *Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return t.appendJSON(b)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, as encoding/json does: ", \ and
// control characters escaped (\b \f \n \r \t short), invalid UTF-8 replaced by U+FFFD, and U+2028
// and U+2029 escaped (JavaScript line terminators).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
