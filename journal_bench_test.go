package sessionstore

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// BenchmarkFleetAppend: one writer per session, durable appends of 300 B
// and of 16 KiB (a tool result), on the real file system, through the
// shared journal (and without it, JournalSize -1, side by side). It
// reports appends/s, and for the journal the commits each group carried.
func BenchmarkFleetAppend(b *testing.B) {
	for _, size := range []int{300, 16 << 10} {
		for _, sessions := range []int{1, 16, 256} {
			for _, mode := range []struct {
				name string
				size int64
			}{{"journal", DefaultJournalSize}, {"nojournal", -1}} {
				b.Run(mode.name+"/"+itoa(sessions)+"/"+itoa(size), func(b *testing.B) {
					fleetAppend(b, sessions, size, mode.size)
				})
			}
		}
	}
}

// fleetAppend is one run of BenchmarkFleetAppend: sessions writers, each
// appending records of size bytes, with Options.JournalSize journal.
func fleetAppend(b *testing.B, sessions, size int, journal int64) {
	ctx := context.Background()
	s, err := Open(b.TempDir(), &Options{JournalSize: journal})
	require.NoError(b, err)
	defer s.Close()
	text := string(bytes.Repeat(make300(), size/300+1)[:size])
	ids := make([]uuid.UUID, sessions)
	for i := range ids {
		m, err := s.Create(ctx, Meta{})
		require.NoError(b, err)
		ids[i] = m.ID
		_, err = s.Append(ctx, m.ID, UserText(text))
		require.NoError(b, err)
	}
	per := max(b.N/sessions, 1)
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			for range per {
				if _, err := s.Append(ctx, id, UserText(text)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(per*sessions)/b.Elapsed().Seconds(), "appends/s")
	if w := s.opts.jr.writerIfAny(); w != nil {
		st := w.Stats()
		if st.Groups > 0 {
			b.ReportMetric(float64(st.Commits)/float64(st.Groups), "commits/group")
			b.ReportMetric(float64(st.Checkpoints), "checkpoints")
		}
	}
}

func make300() []byte {
	b := make([]byte, 300)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
