package claude

import (
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recAt is rec with the time given in seconds from the start, for files
// longer than a minute of records.
func recAt(u, p string, s int) string {
	parent := "null"
	if p != "" {
		parent = `"` + p + `"`
	}
	return fmt.Sprintf(`{"type":"user","uuid":%q,"parentUuid":%s,"sessionId":"s","timestamp":"2026-01-01T%02d:%02d:%02dZ","message":{"role":"user","content":%q}}`, u, parent, s/3600%24, s/60%60, s%60, u)
}

// backwardChain is a transcript of a root and n records each naming the
// next line as its parent (children before parents), the last naming the
// root: the whole chain waits for its last line.
func backwardChain(n int) []byte {
	var b strings.Builder
	b.WriteString(recAt("root", "", 0) + "\n")
	for i := range n {
		p := fmt.Sprint("r", i+1)
		if i == n-1 {
			p = "root"
		}
		b.WriteString(recAt(fmt.Sprint("r", i), p, i+1) + "\n")
	}
	return []byte(b.String())
}

// A chain written children first is placed without a stack frame per
// record: with the goroutine stack limited to 1 MiB, 25,000 records
// (which the input could make any number; a frame per record of 48 bytes
// or more would overflow it) read into one chain.
func TestReadBackwardChainDoesNotRecurse(t *testing.T) {
	const n = 25_000
	defer debug.SetMaxStack(debug.SetMaxStack(1 << 20))
	f := parseFile("t.jsonl", backwardChain(n))
	require.Empty(t, f.Errors)
	require.Len(t, f.Sessions, 1)
	s := f.Sessions[0]
	require.Len(t, s.Events, n+1)
	byID := make(map[uuid.UUID]string, n+1)
	for _, ev := range s.Events {
		m, err := ev.Message()
		require.NoError(t, err)
		byID[ev.ID] = m.Content
	}
	for _, ev := range s.Events[1:] {
		c := byID[ev.ID]
		want := "root"
		if i := strings.TrimPrefix(c, "r"); i != fmt.Sprint(n-1) {
			var k int
			fmt.Sscan(i, &k)
			want = fmt.Sprint("r", k+1)
		}
		require.Equal(t, want, byID[ev.ParentID], "parent of %s", c)
	}
	assert.Equal(t, "r0", byID[s.Head])
}

// cycles is a transcript of a root and n pairs of records each naming
// the other as its parent: n cycles whose parents never come.
func cycles(n int) []byte {
	var b strings.Builder
	b.WriteString(recAt("root", "", 0) + "\n")
	for i := range n {
		x, y := fmt.Sprint("x", i), fmt.Sprint("y", i)
		b.WriteString(recAt(x, y, 2*i+1) + "\n")
		b.WriteString(recAt(y, x, 2*i+2) + "\n")
	}
	return []byte(b.String())
}

// BenchmarkReadCycles reads transcripts of parent cycles of growing size
// side by side: the time per record stays flat as the file grows.
func BenchmarkReadCycles(b *testing.B) {
	for _, pairs := range []int{4_000, 8_000, 16_000} {
		data := cycles(pairs)
		records := 2*pairs + 1
		b.Run(fmt.Sprint("records=", records), func(b *testing.B) {
			for b.Loop() {
				f := parseFile("t.jsonl", data)
				if len(f.Sessions) != 1 || len(f.Sessions[0].Events) != records {
					b.Fatalf("read %d sessions", len(f.Sessions))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(records), "ns/record")
		})
	}
}

// Records whose parents never come because they name one another are
// reported as a cycle, once per cycle, at its first line, and not as
// naming a parent that is not in the file; a record below a cycle is
// placed under it, unreported.
func TestReadCyclesReportedAsCycles(t *testing.T) {
	lines := []string{
		rec("a", "", 0),
		rec("d", "b", 1), // below the cycle b, c
		rec("b", "c", 2),
		rec("c", "b", 3),
		rec("e", "g", 4), // a cycle of three: e, f, g
		rec("f", "e", 5),
		rec("g", "f", 6),
	}
	f := parseFile("t.jsonl", []byte(strings.Join(lines, "\n")+"\n"))
	require.Len(t, f.Sessions, 1)
	var got []int
	for _, e := range f.Errors {
		got = append(got, lineOf(t, e))
		assert.Contains(t, e.Error(), "in a cycle of")
		assert.NotContains(t, e.Error(), "not in the file")
	}
	assert.Equal(t, []int{3, 5}, got, "one report per cycle, at its first line: %v", f.Errors)
	assert.Contains(t, f.Errors[0].Error(), "cycle of 2 records")
	assert.Contains(t, f.Errors[1].Error(), "cycle of 3 records")
	parents := map[string]string{}
	byID := map[uuid.UUID]string{}
	for _, ev := range f.Sessions[0].Events {
		m, err := ev.Message()
		require.NoError(t, err)
		byID[ev.ID] = m.Content
		parents[m.Content] = byID[ev.ParentID]
	}
	assert.Equal(t, map[string]string{"a": "", "b": "a", "c": "b", "d": "b", "e": "c", "f": "e", "g": "f"}, parents)
}

// BenchmarkNameSessions names the sessions of growing numbers of files,
// each named by a summary line, from the summaries of all of them, as
// Import does, side by side: the time per file stays flat.
func BenchmarkNameSessions(b *testing.B) {
	for _, n := range []int{2_000, 4_000, 8_000} {
		var infos []*sessionInfo
		summaries := map[string]string{}
		for i := range n {
			u := fmt.Sprint("r", i)
			f := parseFile("t.jsonl", []byte(recAt(u, "", i)+"\n"))
			infos = append(infos, f.infos[0])
			summaries[u] = fmt.Sprint("session ", i)
		}
		b.Run(fmt.Sprint("files=", n), func(b *testing.B) {
			for b.Loop() {
				for i, info := range infos {
					if nameOf(summaries, info) != fmt.Sprint("session ", i) {
						b.Fatal("wrong name")
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/file")
		})
	}
}
