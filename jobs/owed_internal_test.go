package jobs

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestBatches(t *testing.T) {
	t.Parallel()
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("job-%d", i)
		}
		return out
	}
	tests := []struct {
		name  string
		n     int
		sizes []int
	}{
		{"None", 0, nil},
		{"One", 1, []int{1}},
		{"Full", 1000, []int{1000}},
		{"FullPlusOne", 1001, []int{1000, 1}},
		{"TwoAndABit", 2500, []int{1000, 1000, 500}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := ids(tt.n)
			got := batches(in, owedBatch)
			var sizes []int
			var joined []string
			for _, b := range got {
				sizes = append(sizes, len(b))
				joined = append(joined, b...)
			}
			if !slices.Equal(sizes, tt.sizes) {
				t.Fatalf("batch sizes: got %v, want %v", sizes, tt.sizes)
			}
			if !slices.Equal(joined, in) {
				t.Fatal("batches: the ids are not all there, once, in order")
			}
			// A batch must not share capacity with the next: appending to
			// one would overwrite the other's ids.
			for _, b := range got {
				if cap(b) != len(b) && len(got) > 1 && &b[0] != &got[len(got)-1][0] {
					t.Fatalf("batch of %d ids has capacity %d", len(b), cap(b))
				}
			}
		})
	}
}

func TestPollJitter(t *testing.T) {
	t.Parallel()
	const d = 10 * time.Second
	for range 1000 {
		if got := pollJitter(d); got < 8*time.Second || got > 12*time.Second {
			t.Fatalf("pollJitter(%s) = %s, want within [8s, 12s]", d, got)
		}
	}
}
