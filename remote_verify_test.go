package sessionstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// TestRemoteDamagedSealedBlockFoundWhenRead: a restore checks a
// downloaded sealed chunk's structure and leaves its blocks to the reads
// that need them (each checked once, by its CRC-32C and zstd checksum).
// A flipped byte in the oldest chunk's first block, which the active path
// crosses, is a *CorruptionError from Load naming the object's key (found
// by the read), as is one in its frame table (found at the download). A
// copy damaged on its way is downloaded anew: once the object is whole
// again, the session's next open loads every event.
func TestRemoteDamagedSealedBlockFoundWhenRead(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		at   func(size int) int // the byte flipped
	}{
		{"a block", func(int) int { return 16 }},
		{"the frame table", func(size int) int { return size - 68 - 20 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := newMemObjects()
			opts := remoteOpts(obj)
			opts.ChunkSize = 8 << 10
			opts.LeaseTime = time.Millisecond
			a, _ := apiNewStore(t, opts)
			m, err := a.Create(ctx, Meta{})
			require.NoError(t, err)
			for i := range 200 {
				apiAppend(t, a, m.ID, textEv(fmt.Sprintf("event %d %s", i, strings.Repeat("x", i%7*40))))
			}
			require.NoError(t, a.Close())
			sealed := obj.keys(seam.SessionPrefix(m.ID) + "chunks/")
			require.Greater(t, len(sealed), 2)
			bad := sealed[0] // chunk 0: the oldest, on the path
			require.Contains(t, bad, chunkName(0))
			obj.mu.Lock()
			o := obj.objs[bad]
			o.data[c.at(len(o.data))] ^= 0x10
			obj.objs[bad] = o
			obj.mu.Unlock()

			b, _ := apiNewStore(t, remoteOpts(obj))
			evs, err := b.Load(ctx, m.ID)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce, "loaded %d events", len(evs))
			assert.ErrorIs(t, err, ErrCorrupt)
			assert.Equal(t, bad, ce.Path)

			obj.mu.Lock()
			o = obj.objs[bad]
			o.data[c.at(len(o.data))] ^= 0x10 // whole again: the damage was on the way
			obj.objs[bad] = o
			obj.mu.Unlock()
			require.NoError(t, b.CloseSession(ctx, m.ID))
			evs, err = b.Load(ctx, m.ID)
			require.NoError(t, err, "downloaded anew")
			assert.Len(t, evs, 200)
		})
	}
}
