package apitest

import (
	"encoding/json"
	"testing"
)

// JSONObject is v encoded as JSON and decoded into a map: the object as a
// client that reads it without this release's Go types sees it.
func JSONObject(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
