package journal

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// smallJournal builds a 16 KiB journal that has wrapped and checkpointed
// (both header slots written), holds a Forget, and ends with a group of
// two records. It returns the file's bytes, its path, what every lsn
// committed, and the lsns of the last group.
func smallJournal(t testing.TB) ([]byte, string, history, []uint64) {
	t.Helper()
	m, w := newMem(t, 16<<10)
	h := history{}
	for _, p := range []string{"a/1", "a/2", "b/1"} {
		makeFile(t, m, memRoot, p)
	}
	// Checkpoints are run here, every 8 commits, so that the ring never
	// gets half full and the writer never starts one of its own: a
	// background checkpoint's timing would decide which of the last
	// records it covers, and the journal would differ from run to run.
	for i := 0; w.Stats().Wraps == 0 || w.Stats().Checkpoints < 2; i++ {
		commitT(t, w, h, Record{Op: OpWrite, Path: "a/1", Offset: int64(i * 200), Data: payload(1, i, 200)})
		if i%8 == 7 {
			w.checkpoint()
		}
		require.Less(t, i, 1000)
	}
	w.checkpoint()
	commitT(t, w, h, Record{Op: OpWrite, Path: "a/2", Data: payload(2, 0, 100)})
	_, err := w.Forget(context.Background(), "a/")
	require.NoError(t, err)
	commitT(t, w, h, Record{Op: OpWrite, Path: "b/1", Data: payload(3, 0, 50)})
	commitT(t, w, h, Record{Op: OpWrite, Path: "a/2", Offset: 100, Data: payload(2, 1, 80)})
	last := commitT(t, w, h, Record{Op: OpWrite, Path: "b/1", Offset: 50, Data: payload(3, 1, 60)},
		Record{Op: OpWrite, Path: "a/1", Offset: 7, Data: payload(1, -1, 70)})
	require.Equal(t, 0, pendingKicks(w), "no checkpoint of the writer's own")
	b, err := vfs.ReadFile(m, w.Path())
	require.NoError(t, err)
	return b, w.Path(), h, []uint64{last - 1, last}
}

// entryRange is the bytes of e's frame in the journal.
func entryRange(e Entry) (int64, int64) {
	return e.At, e.At + frameSize(len(e.Path), len(e.Data))
}

// TestFlipEveryByte changes every byte of a small journal in turn (one
// bit, then all eight) and reads it: the damage is reported as a
// *CorruptionError, or the log read holds only records that were
// committed, with their content, and every record of the undamaged log,
// but for the last group when the damage is in it (a torn tail, cut).
// Damage to a record of any other group is always reported.
func TestFlipEveryByte(t *testing.T) {
	b, name, h, lastGroup := smallJournal(t)
	orig, err := parse(name, b)
	require.NoError(t, err)
	require.Len(t, orig.Entries, 4, "b/1 twice, a/2@100 and the last group's a/1")
	inLast := func(i int64) bool {
		for _, e := range orig.Entries {
			if e.LSN == lastGroup[0] || e.LSN == lastGroup[1] {
				if from, to := entryRange(e); i >= from && i < to {
					return true
				}
			}
		}
		return false
	}
	inOther := func(i int64) bool {
		for _, e := range orig.Entries {
			if from, to := entryRange(e); i >= from && i < to && !inLast(i) {
				return true
			}
		}
		return false
	}
	detected, harmless := 0, 0
	for i := range int64(len(b)) {
		for _, mask := range []byte{1 << (i % 8), 0xff} {
			d := bytes.Clone(b)
			d[i] ^= mask
			what := fmt.Sprintf("byte %d ^ %#x", i, mask)
			log, err := parse(name, d)
			if err != nil {
				require.ErrorIs(t, err, ErrCorrupt, what)
				var ce *CorruptionError
				require.ErrorAs(t, err, &ce, what)
				assert.Equal(t, name, ce.Path)
				detected++
				continue
			}
			require.False(t, inOther(i), "%s: damage to a durable record not reported", what)
			got := map[uint64]bool{}
			for _, e := range log.Entries {
				r, ok := h[e.LSN]
				require.True(t, ok, "%s: lsn %d never committed", what, e.LSN)
				require.True(t, r.Path == e.Path && r.Offset == e.Offset && bytes.Equal(r.Data, e.Data), "%s: lsn %d is a wrong record", what, e.LSN)
				got[e.LSN] = true
			}
			for _, e := range orig.Entries {
				if !got[e.LSN] {
					require.True(t, inLast(i), "%s: lsn %d lost", what, e.LSN)
				}
			}
			harmless++
		}
	}
	t.Logf("%d flips reported, %d read back correctly (or as a torn tail)", detected, harmless)
	assert.Positive(t, detected)
}

// TestTornTailAndCorruption damages a journal in the ways a crash or
// a disk can: a torn last group is cut without an error; damage before a
// later durable group is a *CorruptionError at the damaged group.
func TestTornTailAndCorruption(t *testing.T) {
	b, name, _, lastGroup := smallJournal(t)
	orig, err := parse(name, b)
	require.NoError(t, err)
	var last0, last1, middle Entry
	for _, e := range orig.Entries {
		switch e.LSN {
		case lastGroup[0]:
			last0 = e
		case lastGroup[1]:
			last1 = e
		}
	}
	middle = orig.Entries[0]
	tests := []struct {
		name    string
		damage  func(d []byte)
		corrupt int64 // offset of the *CorruptionError, or -1
		entries int
	}{
		{"intact", func(d []byte) {}, -1, 4},
		{"last group's second record zeroed", func(d []byte) {
			from, to := entryRange(last1)
			clear(d[from:to])
		}, -1, 2},
		{"last group's first record zeroed", func(d []byte) {
			from, to := entryRange(last0)
			clear(d[from:to])
		}, -1, 2},
		{"last group garbled", func(d []byte) {
			from, _ := entryRange(last0)
			for i := from + 40; i < from+60; i++ {
				d[i] = byte(i)
			}
		}, -1, 2},
		{"middle record flipped", func(d []byte) { d[middle.At+frameHeader+5] ^= 0x10 }, middle.At, 0},
		{"middle record zeroed", func(d []byte) {
			from, to := entryRange(middle)
			clear(d[from:to])
		}, middle.At, 0},
		{"both header slots damaged", func(d []byte) { d[100] ^= 1; d[slotSize+100] ^= 1 }, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := bytes.Clone(b)
			tt.damage(d)
			log, err := parse(name, d)
			if tt.corrupt >= 0 {
				var ce *CorruptionError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tt.corrupt, ce.Offset)
				assert.Equal(t, name, ce.Path)
				return
			}
			require.NoError(t, err)
			assert.Len(t, log.Entries, tt.entries)
			if tt.entries < 4 {
				assert.Equal(t, last0.At, log.Torn, "the torn group's offset")
			} else {
				assert.Equal(t, int64(-1), log.Torn)
			}
		})
	}
}

// pendingKicks is the number of checkpoints the writer asked itself for
// and has not started.
func pendingKicks(w *Writer) int { return len(w.kick) }
