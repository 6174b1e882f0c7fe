package claude

import (
	"context"
	"os"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
	"github.com/stretchr/testify/require"
)

// BenchmarkImport imports the shared transcripts into a new store: the
// whole of Import, reading, mapping and the durable appends.
func BenchmarkImport(b *testing.B) {
	dir := sharedData(b)
	var rep importer.Report
	for b.Loop() {
		b.StopTimer()
		st, err := sessionstore.Open(b.TempDir(), nil)
		require.NoError(b, err)
		b.StartTimer()
		rep, err = Import(context.Background(), st, []string{dir}, nil)
		require.NoError(b, err)
		b.StopTimer()
		require.NoError(b, st.Close())
		b.StartTimer()
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(rep.Added)/sec, "events/s")
	b.ReportMetric(float64(rep.Bytes)/1e6/sec, "MB/s")
}

// BenchmarkRead parses the shared transcripts without writing: the
// reader's share of an import.
func BenchmarkRead(b *testing.B) {
	files := transcripts(b, sharedData(b))
	var size int64
	for _, p := range files {
		fi, err := os.Stat(p)
		require.NoError(b, err)
		size += fi.Size()
	}
	events := 0
	for b.Loop() {
		events = 0
		for _, p := range files {
			f, err := Read(p)
			require.NoError(b, err)
			for _, s := range f.Sessions {
				events += len(s.Events)
			}
		}
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(events)/sec, "events/s")
	b.ReportMetric(float64(size)/1e6/sec, "MB/s")
}
