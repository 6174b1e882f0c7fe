package sessionstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// putMetaCopies puts a metadata copy (meta/<id>/<n>) for each id into
// obj, as sessions' holders do, without their logs: what ListPage reads.
func putMetaCopies(t *testing.T, obj *memObjects, ids []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	for i, id := range ids {
		b, err := encodeMeta(Meta{ID: id, Name: fmt.Sprint("s", i), WorkingDir: fmt.Sprint("/w", i%5), CreatedAt: time.UnixMilli(1).UTC(), UpdatedAt: time.UnixMilli(1).UTC()}, formatVersion)
		require.NoError(t, err)
		require.NoError(t, obj.Put(ctx, fmt.Sprintf("%s%s/%020d", metaPrefix, id, 2), b))
	}
}

// v7At returns a UUIDv7 of time ms with random bits from rng.
func v7At(rng *rand.Rand, ms int64) uuid.UUID {
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[:8], uint64(ms)<<16|rng.Uint64()&0x0fff|0x7000)
	binary.BigEndian.PutUint64(id[8:], rng.Uint64()&^(3<<62)|2<<62)
	return id
}

// TestListPageRemoteListsItsPage: with an object store that lists from a
// key on (ObjectListerAfter), a page of ListPage costs a few listings,
// not one per thousand sessions, whatever the ids' spread (over two
// years, within one second, ids alike in their first 8 bytes); a walk
// returns exactly what the listing of every copy does (the object store
// without ListAfter), newest first.
func TestListPageRemoteListsItsPage(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	spread := func(n int, span time.Duration) []uuid.UUID {
		ids := make([]uuid.UUID, n)
		for i := range ids {
			ids[i] = v7At(rng, now-rng.Int64N(span.Milliseconds()+1))
		}
		return ids
	}
	alike := make([]uuid.UUID, 1200) // more than a listing page share their first 8 bytes
	for i := range alike {
		alike[i] = v7At(rng, now)
		copy(alike[i][:8], alike[0][:8])
	}
	cases := []struct {
		name     string
		ids      []uuid.UUID
		maxLists int // per page
	}{
		{"two years", spread(3000, 2*365*24*time.Hour), 12},
		{"one second", spread(3000, time.Second), 30},
		{"alike", append(spread(100, time.Hour), alike...), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj := newMemObjects()
			putMetaCopies(t, obj, c.ids)
			s, err := Open(t.TempDir(), remoteOpts(obj))
			require.NoError(t, err)
			defer s.Close()
			for _, q := range []Query{{Limit: 25}, {Limit: 25, WorkingDir: "/w3"}} {
				obj.noListAfter = true
				all, _ := walkPages(t, s, q)
				obj.noListAfter = false
				require.NotEmpty(t, all)
				want := make([]uuid.UUID, len(all))
				for i, m := range all {
					want[i] = m.ID
				}
				var got []uuid.UUID
				cursor, pages, worst := "", 0, 0
				for {
					lists := obj.count("list")
					page, next, err := s.ListPage(ctx, Query{Limit: q.Limit, WorkingDir: q.WorkingDir}, cursor)
					require.NoError(t, err)
					worst = max(worst, obj.count("list")-lists)
					for _, m := range page {
						got = append(got, m.ID)
					}
					pages++
					if next == "" {
						break
					}
					cursor = next
				}
				assert.Equal(t, want, got, "%+v: the same sessions, newest first", q)
				assert.True(t, slices.IsSortedFunc(got, func(a, b uuid.UUID) int { return -compareIDs(a, b) }), "newest first")
				if c.maxLists > 0 {
					assert.LessOrEqual(t, worst, c.maxLists, "%+v: listings per page (%d pages)", q, pages)
				}
				t.Logf("%+v: %d sessions in %d pages, at most %d listings a page", q, len(got), pages, worst)
			}
		})
	}
}

func compareIDs(a, b uuid.UUID) int {
	return slices.Compare(a[:], b[:])
}

// TestListPageRemoteListingsDoNotGrow: with ten times the sessions
// (30,000 over two years), a page still costs a few listings, where
// listing every copy costs 30; the pages are the same.
func TestListPageRemoteListingsDoNotGrow(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	ids := make([]uuid.UUID, 30000)
	for i := range ids {
		ids[i] = v7At(rng, now-rng.Int64N((2*365*24*time.Hour).Milliseconds()))
	}
	obj := newMemObjects()
	putMetaCopies(t, obj, ids)
	s, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	defer s.Close()
	cursor, fallback := "", ""
	for page := range 5 {
		obj.noListAfter = true
		want, wantNext, err := s.ListPage(ctx, Query{Limit: 50}, fallback)
		require.NoError(t, err)
		// Listing every copy: a request per thousand keys on S3 (one
		// call here).
		full := (len(obj.keys(metaPrefix)) + 999) / 1000
		obj.noListAfter = false
		lists := obj.count("list")
		got, next, err := s.ListPage(ctx, Query{Limit: 50}, cursor)
		require.NoError(t, err)
		after := obj.count("list") - lists
		assert.Equal(t, want, got, "page %d", page)
		assert.Equal(t, wantNext, next, "page %d", page)
		require.GreaterOrEqual(t, full, 30, "precondition: 30,000 copies")
		assert.LessOrEqual(t, after, 8, "page %d: listings", page)
		t.Logf("page %d: %d listings, against %d", page, after, full)
		cursor, fallback = next, wantNext
	}
}
