package claude

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

var (
	sessionIDRE = regexp.MustCompile(`"sessionId":"[^"]*"`)
	ownUUIDRE   = regexp.MustCompile(`"uuid":"([0-9a-f-]{36})"`)
)

// largeTranscript writes one transcript of about size bytes made from the shared
// real transcripts (the main ones, not the subagents'), repeated: each
// repetition of a file gets its own ids (every UUID in it mapped to a
// new one, the same way throughout the repetition), its roots are hung
// below the last event of the repetition before, and every line names
// one session. So it is one session of n lines with the files' own
// shapes (branches, sidechains, summaries, tool results). It returns the
// path, the file's size and its number of lines.
func largeTranscript(tb testing.TB, size int64) (string, int64, int) {
	tb.Helper()
	var files []string
	for _, p := range transcripts(tb, sharedData(tb)) {
		if !strings.Contains(p, string(filepath.Separator)+"subagents"+string(filepath.Separator)) {
			files = append(files, p)
		}
	}
	require.NotEmpty(tb, files)
	var sources [][][]byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		require.NoError(tb, err)
		var lines [][]byte
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines = append(lines, l)
			}
		}
		sources = append(sources, lines)
	}
	path := filepath.Join(tb.TempDir(), "large.jsonl")
	f, err := os.Create(path)
	require.NoError(tb, err)
	w := bufio.NewWriterSize(f, 1<<20)
	session := []byte(`"sessionId":"5f0c2a8e-0d1b-4c57-9a3e-6b1f2d4c8e90"`)
	var written int64
	lines, unit := 0, 0
	last := ""
	for written < size {
		src := sources[unit%len(sources)]
		unit++
		unitLast := last
		for _, l := range src {
			if written >= size {
				break
			}
			l = sessionIDRE.ReplaceAll(l, session)
			l = mapUUIDs(l, func(u []byte) []byte {
				if bytes.Equal(u, session[len(`"sessionId":"`):len(session)-1]) {
					return u
				}
				h := sha256.Sum256(fmt.Appendf(nil, "%s/%d", u, unit))
				h[6] = h[6]&0x0f | 0x40
				h[8] = h[8]&0x3f | 0x80
				return fmt.Appendf(nil, "%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
			})
			if last != "" {
				l = bytes.ReplaceAll(l, []byte(`"parentUuid":null`), []byte(`"parentUuid":"`+last+`"`))
			}
			if m := ownUUIDRE.FindSubmatch(l); m != nil {
				unitLast = string(m[1])
			}
			n, err := w.Write(append(l, '\n'))
			require.NoError(tb, err)
			written += int64(n)
			lines++
		}
		last = unitLast
	}
	require.NoError(tb, w.Flush())
	require.NoError(tb, f.Close())
	return path, written, lines
}

// mapUUIDs returns l with every UUID in its canonical text form replaced
// by what to returns for it.
func mapUUIDs(l []byte, to func(u []byte) []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i+36 <= len(l); i++ {
		if !isUUID(l[i : i+36]) {
			continue
		}
		out = append(append(out, l[last:i]...), to(l[i:i+36])...)
		last = i + 36
		i += 35
	}
	if out == nil {
		return l
	}
	return append(out, l[last:]...)
}

func isUUID(b []byte) bool {
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// peakHeap samples the live heap (runtime/metrics, heap objects) every
// millisecond until stop is called, which returns the highest sample.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// BenchmarkImportLarge imports one transcript of 46 MB (largeTranscript)
// into a new store: MB/s of the input, and the peak live heap during the
// import less the heap before it.
func BenchmarkImportLarge(b *testing.B) {
	path, size, lines := largeTranscript(b, 46e6)
	var peak uint64
	for b.Loop() {
		b.StopTimer()
		st, err := sessionstore.Open(b.TempDir(), nil)
		require.NoError(b, err)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		stop := peakHeap()
		b.StartTimer()
		rep, err := Import(context.Background(), st, []string{path}, nil)
		require.NoError(b, err)
		b.StopTimer()
		if p := stop(); p > before.HeapAlloc && p-before.HeapAlloc > peak {
			peak = p - before.HeapAlloc
		}
		require.Greater(b, rep.Added, lines*9/10, "events imported") // a few lines name a parent in another file (continued sessions)
		require.NoError(b, st.Close())
		b.StartTimer()
	}
	b.ReportMetric(float64(size)/1e6/(b.Elapsed().Seconds()/float64(b.N)), "MB/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(size)/1e6, "input-MB")
	b.ReportMetric(float64(lines), "input-lines")
}
