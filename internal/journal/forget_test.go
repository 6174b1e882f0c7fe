package journal

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// naiveForgets is the definition applyForgets implements: an OpWrite
// entry is kept unless an OpForget of greater lsn has a prefix of its
// path.
func naiveForgets(all []Entry) []Entry {
	var out []Entry
	for i, e := range all {
		if e.Op != OpWrite {
			continue
		}
		obsolete := false
		for _, f := range all[i+1:] {
			if f.Op == OpForget && strings.HasPrefix(e.Path, f.Path) {
				obsolete = true
				break
			}
		}
		if !obsolete {
			out = append(out, e)
		}
	}
	return out
}

// TestApplyForgetsMatchesDefinition compares applyForgets with the
// definition on random logs over paths that are prefixes of one another
// ("s/a", "s/ab", "s/a/", ...), empty and repeated Forgets included.
func TestApplyForgetsMatchesDefinition(t *testing.T) {
	paths := []string{"s/a", "s/ab", "s/a/1", "s/a/10", "s/ab/1", "s/b/1", "t", "t/x"}
	prefixes := append([]string{"", "s/", "s/a/", "s/a/1", "s/ab/", "s/a"}, paths...)
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		all := make([]Entry, 1+rng.IntN(40))
		for i := range all {
			all[i].LSN = uint64(i + 1)
			if rng.IntN(4) == 0 {
				all[i].Record = Record{Op: OpForget, Path: prefixes[rng.IntN(len(prefixes))]}
			} else {
				all[i].Record = Record{Op: OpWrite, Path: paths[rng.IntN(len(paths))], Offset: int64(i)}
			}
		}
		want := naiveForgets(all)
		got := applyForgets(all)
		if !assert.Equal(t, len(want), len(got), "seed %d", seed) {
			return
		}
		for i := range want {
			if !assert.Equal(t, want[i].LSN, got[i].LSN, "seed %d", seed) {
				return
			}
		}
	}
}

// forgetLog is a log of n records, every other one a Forget of another
// file: the shape of a log whose commits each forget a file.
func forgetLog(n int) []Entry {
	all := make([]Entry, n)
	for i := range all {
		all[i].LSN = uint64(i + 1)
		if i%2 == 0 {
			all[i].Record = Record{Op: OpForget, Path: fmt.Sprintf("sessions/%07d/", i)}
		} else {
			all[i].Record = Record{Op: OpWrite, Path: "sessions/x/chunk"}
		}
	}
	return all
}

// BenchmarkApplyForgets measures applyForgets on a log of n records and
// on one of 16n side by side: ns/record should be about the same (the
// time linear in the log), not 16 times more.
func BenchmarkApplyForgets(b *testing.B) {
	const n = 4096
	small, large := forgetLog(n), forgetLog(16*n)
	var tSmall, tLarge float64
	for b.Loop() {
		start := time.Now()
		applyForgets(small)
		tSmall += float64(time.Since(start))
		start = time.Now()
		applyForgets(large)
		tLarge += float64(time.Since(start))
	}
	b.ReportMetric(tSmall/float64(b.N)/n, "ns/record-small")
	b.ReportMetric(tLarge/float64(b.N)/(16*n), "ns/record-large")
	b.ReportMetric((tLarge/(16*n))/(tSmall/n), "large/small-per-record")
}
