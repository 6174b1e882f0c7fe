package sessionstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/deltalog"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// syncDeltas syncs the session's delta stream, as the background sync
// does when DeltaSyncInterval passes.
func syncDeltas(s *Store, id uuid.UUID) error {
	return s.withHandle(context.Background(), id, func(h *openSession) error {
		if h.deltas == nil {
			return nil
		}
		return h.deltas.Sync()
	})
}

// streamScript is what the crash-point script did before the power cut.
type streamScript struct {
	published map[uuid.UUID][]string // deltas published after each event, in order
	synced    map[uuid.UUID]int      // how many of them were synced
}

// runStreamScript appends and publishes on s until an error: two events,
// each followed by deltas, some of them synced.
func runStreamScript(s *Store, id uuid.UUID, first uuid.UUID, sc *streamScript) {
	ctx := context.Background()
	after := first
	publish := func(tag string, n int) bool {
		for k := range n {
			d := fmt.Sprintf("%s%d", tag, k)
			if s.Publish(ctx, id, Delta{Kind: DeltaText, Data: d}) != nil {
				return false
			}
			sc.published[after] = append(sc.published[after], d)
		}
		return true
	}
	sync := func() bool {
		if syncDeltas(s, id) != nil {
			return false
		}
		sc.synced[after] = len(sc.published[after])
		return true
	}
	if !publish("a", 3) || !sync() || !publish("a+", 2) {
		return
	}
	ev, err := s.Append(ctx, id, AssistantText("settled"))
	if err != nil {
		return
	}
	after = ev.ID
	if !publish("b", 3) || !sync() || !publish("b+", 1) {
		return
	}
	_ = sync()
}

// TestStreamCrashPoints cuts the power at every write, sync and directory
// change of the script and checks, for every crash mode, that the partial
// output is a prefix of the deltas published after the newest durable
// event, holding at least those synced, and never deltas an event
// superseded.
func TestStreamCrashPoints(t *testing.T) {
	ctx := context.Background()
	o := Options{DurableDeltas: true, DeltaSyncInterval: time.Hour, DeltaSyncBytes: 1 << 30, JournalSize: -1}
	points := 0
	for point := 1; ; point++ {
		m, s, id := memSession(t, o)
		first, err := s.Append(ctx, id, UserText("question"))
		require.NoError(t, err)
		n := 0
		m.SetFault(func(op vfs.Op, _ string) error {
			if vfs.Mutating(op) {
				n++
				if n == point {
					return vfs.ErrPowerLoss
				}
			}
			return nil
		})
		sc := &streamScript{published: map[uuid.UUID][]string{}, synced: map[uuid.UUID]int{}}
		runStreamScript(s, id, first.ID, sc)
		fired := m.PowerCut() != nil
		m.PowerOff()
		_ = s.Close()
		if !fired {
			break
		}
		points++
		for i, mode := range vfs.CrashModes {
			c := m.CrashClone(mode, uint64(point*10+i))
			r := openMem(t, c, Options{DurableDeltas: true})
			path, err := r.Load(ctx, id)
			require.NoError(t, err, "point %d %s", point, mode)
			newest := path[len(path)-1].ID
			p, err := r.PartialOutput(ctx, id)
			require.NoError(t, err, "point %d %s", point, mode)
			var got []string
			for _, d := range p.Deltas {
				got = append(got, d.Data)
			}
			pub := sc.published[newest]
			require.LessOrEqual(t, len(got), len(pub), "point %d %s: deltas never published after %s: %v", point, mode, newest, got)
			if len(got) > 0 {
				assert.Equal(t, newest, p.After)
				assert.Equal(t, pub[:len(got)], got, "point %d %s", point, mode)
			}
			assert.GreaterOrEqual(t, len(got), sc.synced[newest], "point %d %s: synced deltas lost", point, mode)
			require.NoError(t, r.Close())
		}
	}
	t.Logf("%d crash points, %d modes each", points, len(vfs.CrashModes))
	assert.Greater(t, points, 10)
}

// TestStreamFaults: a write or sync of the stream that fails makes
// Publish fail with the error, the events stay writable, and nothing hangs.
func TestStreamFaults(t *testing.T) {
	ctx := context.Background()
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync} {
		t.Run(string(op), func(t *testing.T) {
			o := Options{DurableDeltas: true, DeltaSyncInterval: time.Hour, DeltaSyncBytes: 1 << 30, JournalSize: -1}
			m, s, id := memSession(t, o)
			defer s.Close()
			boom := errors.New("boom")
			m.SetFault(func(o vfs.Op, path string) error {
				if o == op && filepath.Base(filepath.Dir(path)) == deltaStreamDir && filepath.Ext(path) == deltalog.Ext {
					return boom
				}
				return nil
			})
			err := s.Publish(ctx, id, Delta{Kind: DeltaText, Data: "x"})
			if op == vfs.OpSync {
				// The write succeeds; its sync fails, and so does every
				// Publish after it: the stream stops.
				require.NoError(t, err)
				require.ErrorIs(t, syncDeltas(s, id), boom)
				err = s.Publish(ctx, id, Delta{Kind: DeltaText, Data: "y"})
			}
			require.ErrorIs(t, err, boom)
			m.SetFault(nil)
			_, err = s.Append(ctx, id, UserText("still writable"))
			require.NoError(t, err)
		})
	}
}

// writeSegment writes a segment file of the session's stream.
func writeSegment(t *testing.T, dir string, id uuid.UUID, gen uint64, b []byte) string {
	t.Helper()
	sd := filepath.Join(dir, sessionsDir, id.String(), deltaStreamDir)
	require.NoError(t, os.MkdirAll(sd, 0o755))
	path := filepath.Join(sd, deltalog.SegmentName(gen))
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// TestStreamHostileSegments: a truncated, garbled or huge-length segment is
// cut at its last good record by PartialOutput, and ends a Tail with a
// located *CorruptionError unless a newer segment follows it.
func TestStreamHostileSegments(t *testing.T) {
	ctx := context.Background()
	good := []byte(deltalog.Magic)
	var err error
	for _, d := range []string{"one ", "two "} {
		good, err = deltalog.AppendDelta(good, string(DeltaText), "", d)
		require.NoError(t, err)
	}
	huge := binary.LittleEndian.AppendUint32(append([]byte(nil), good...), 0xfffffff0)
	huge = binary.LittleEndian.AppendUint32(huge, 0)
	garbled := append(append([]byte(nil), good...), []byte("\x05\x00\x00\x00garbage!!")...)
	cases := map[string][]byte{
		"truncated": append(append([]byte(nil), good...), good[8:12]...),
		"garbage":   garbled,
		"huge":      huge,
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			s, dir := apiNewStore(t, &Options{DurableDeltas: true})
			meta, err := s.Create(ctx, Meta{})
			require.NoError(t, err)
			path := writeSegment(t, dir, meta.ID, 1, b)
			p, err := s.PartialOutput(ctx, meta.ID)
			require.NoError(t, err)
			assert.Equal(t, "one two ", p.Text(DeltaText))

			tl, err := s.Tail(ctx, meta.ID, "")
			require.NoError(t, err)
			got, _ := tailN(t, tl, 2)
			assert.Equal(t, []item{{delta: "one "}, {delta: "two "}}, got)
			if name == "truncated" {
				// A torn tail is a record being written: the tail waits
				// for it, and moves on once a newer segment shows the
				// writer gone.
				writeSegment(t, dir, meta.ID, 2, append([]byte(deltalog.Magic), mustDelta(t, "three ")...))
				got, _ := tailN(t, tl, 1)
				assert.Equal(t, []item{{delta: "three "}}, got)
				tl.Close()
				return
			}
			for range tl.C {
				t.Fatal("an update past the damage")
			}
			var ce *CorruptionError
			require.ErrorAs(t, tl.Err(), &ce)
			assert.Equal(t, path, ce.Path)
			assert.Equal(t, int64(len(good)), ce.Offset)
		})
	}
}

func mustDelta(t *testing.T, d string) []byte {
	t.Helper()
	b, err := deltalog.AppendDelta(nil, string(DeltaText), "", d)
	require.NoError(t, err)
	return b
}

// TestDeltaBackgroundSync: without an explicit sync, published deltas
// become durable by themselves, by the interval's timer and by the
// bytes' threshold. (The wait is a safety net, not a measure.)
func TestDeltaBackgroundSync(t *testing.T) {
	ctx := context.Background()
	for name, o := range map[string]Options{
		"interval": {DeltaSyncInterval: time.Millisecond, DeltaSyncBytes: 1 << 30},
		"bytes":    {DeltaSyncInterval: time.Hour, DeltaSyncBytes: 1},
	} {
		t.Run(name, func(t *testing.T) {
			o.DurableDeltas, o.JournalSize = true, -1
			m, s, id := memSession(t, o)
			defer s.Close()
			require.NoError(t, s.Publish(ctx, id, Delta{Kind: DeltaText, Data: "durable"}))
			deadline := time.Now().Add(30 * time.Second)
			for {
				c := m.CrashClone(vfs.KeepSynced, 1)
				r := openMem(t, c, Options{ReadOnly: true})
				p, err := r.PartialOutput(ctx, id)
				require.NoError(t, err)
				require.NoError(t, r.Close())
				if p.Text(DeltaText) == "durable" {
					return
				}
				require.True(t, time.Now().Before(deadline), "the delta was never synced")
				time.Sleep(time.Millisecond)
			}
		})
	}
}
