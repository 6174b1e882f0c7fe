package seam

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/eventline"
)

// line is an entry of chunk c at off (10 bytes long) with parent p.
func line(id, p uuid.UUID, c uint32, off int64) eventline.Entry {
	return eventline.Entry{Header: eventline.Header{ID: id, ParentID: p}, Loc: eventline.Location{Chunk: c, Offset: off, Length: 10}}
}

func ids(n int) []uuid.UUID {
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = uuid.New()
	}
	return out
}

func TestExits(t *testing.T) {
	id := ids(8)
	outside := map[uuid.UUID]eventline.Location{
		id[0]: {Chunk: 1, Offset: 500, Length: 10}, // the previous chunk's last line
		id[1]: {Chunk: 0, Offset: 40, Length: 10},  // a fork point two chunks back
	}
	at := func(es []eventline.Entry) func(int) (eventline.Location, bool) {
		return func(i int) (eventline.Location, bool) {
			loc, ok := outside[es[i].ParentID]
			return loc, ok
		}
	}
	cases := []struct {
		name string
		es   []eventline.Entry
		want []Exit
	}{
		{"one branch goes on from the chunk before", []eventline.Entry{
			line(id[2], id[0], 2, 0), line(id[3], id[2], 2, 10), line(id[4], id[3], 2, 20),
		}, []Exit{{Off: 0, Chunk: 1, At: 500}}},
		{"a second branch from a fork point further back", []eventline.Entry{
			line(id[2], id[0], 2, 0), line(id[3], id[2], 2, 10), line(id[4], id[1], 2, 20), line(id[5], id[4], 2, 30),
		}, []Exit{{Off: 0, Chunk: 1, At: 500}, {Off: 20, Chunk: 0, At: 40}}},
		{"interleaved: a run per change of way", []eventline.Entry{
			line(id[2], id[0], 2, 0), line(id[4], id[1], 2, 10), line(id[3], id[2], 2, 20), line(id[5], id[4], 2, 30),
		}, []Exit{{Off: 0, Chunk: 1, At: 500}, {Off: 10, Chunk: 0, At: 40}, {Off: 20, Chunk: 1, At: 500}, {Off: 30, Chunk: 0, At: 40}}},
		{"the session's first events", []eventline.Entry{
			line(id[2], uuid.Nil, 0, 0), line(id[3], id[2], 0, 10),
		}, []Exit{{Off: 0, Root: true}}},
		{"a compaction on the way out", func() []eventline.Entry {
			es := []eventline.Entry{line(id[2], id[0], 2, 0), line(id[3], id[2], 2, 10), line(id[4], id[3], 2, 20)}
			es[1].Kind = eventline.KindCompaction
			return es
		}(), []Exit{{Off: 0, Chunk: 1, At: 500}, {Off: 10, Chunk: 1, At: 500, Compaction: true}}},
		{"a parent whose line names no location", []eventline.Entry{
			line(id[2], id[6], 2, 0),
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Exits(c.es, at(c.es)))
		})
	}

	t.Run("more runs than MaxExits", func(t *testing.T) {
		var es []eventline.Entry
		a, b := id[0], id[1]
		for i := range MaxExits + 1 {
			x := uuid.New()
			if i%2 == 0 {
				es, a = append(es, line(x, a, 2, int64(10*i))), x
			} else {
				es, b = append(es, line(x, b, 2, int64(10*i))), x
			}
		}
		assert.Len(t, Exits(es[:MaxExits], at(es)), MaxExits)
		assert.Nil(t, Exits(es, at(es)))
	})
	t.Run("a parent location not in an earlier chunk", func(t *testing.T) {
		es := []eventline.Entry{line(id[2], id[0], 1, 0)}
		assert.Nil(t, Exits(es, at(es)))
	})
}

func TestChain(t *testing.T) {
	tables := map[uint32][]Exit{
		0: {{Off: 0, Root: true}},
		1: {{Off: 0, Chunk: 0, At: 900}},
		2: {{Off: 0, Chunk: 1, At: 700}, {Off: 300, Chunk: 0, At: 40}},
		3: {{Off: 0, Chunk: 2, At: 800}},
	}
	at := func(c uint32, off int64) eventline.Location {
		return eventline.Location{Chunk: c, Offset: off, Length: 10}
	}
	assert.Equal(t, []uint32{3, 2, 0}, Chain(tables, at(3, 50)), "chunk 2's line at 800 is on the branch from chunk 0")
	assert.Equal(t, []uint32{2, 1, 0}, Chain(tables, at(2, 299)))
	assert.Equal(t, []uint32{4}, Chain(tables, at(4, 0)), "no table: the chain ends")
	withCompaction := map[uint32][]Exit{0: tables[0], 1: tables[1], 2: {{Off: 0, Chunk: 1, At: 700, Compaction: true}}, 3: tables[3]}
	assert.Equal(t, []uint32{3, 2}, Chain(withCompaction, at(3, 50)), "a compaction's chunk ends the chain")

	bad := map[string][]Exit{
		"runs out of order":         {{Off: 300, Chunk: 0, At: 40}, {Off: 0, Chunk: 1, At: 700}},
		"a target in a later chunk": {{Off: 0, Chunk: 3, At: 700}},
		"a target in its own chunk": {{Off: 0, Chunk: 2, At: 700}},
		"a negative offset":         {{Off: -1, Chunk: 1, At: 700}},
	}
	for name, xs := range bad {
		t.Run(name, func(t *testing.T) {
			tb := map[uint32][]Exit{0: tables[0], 1: tables[1], 2: xs, 3: tables[3]}
			assert.Equal(t, []uint32{3, 2}, Chain(tb, at(3, 50)), "chunk 2's table is ignored")
		})
	}
}

// TestSealRecordCarriesExits: a seal record's table reaches the state a
// marker records, through JSON.
func TestSealRecordCarriesExits(t *testing.T) {
	xs := []Exit{{Off: 0, Chunk: 1, At: 500}, {Off: 20, Root: true}}
	var st State
	st.Apply(7, &Header{Kind: KindSeal, Chunk: 2, Key: "k", Size: 30, Exits: xs})
	b, err := json.Marshal(st.Clone())
	require.NoError(t, err)
	var back State
	require.NoError(t, json.Unmarshal(b, &back))
	s, ok := back.SealedChunk(2)
	require.True(t, ok)
	assert.Equal(t, xs, s.Exits)
}

// FuzzChain: any tables, any start: Chain ends, within its bound, with
// every chunk after the first earlier than the one before.
func FuzzChain(f *testing.F) {
	f.Add([]byte(`{"0":[{"off":0,"root":true}],"1":[{"off":0,"chunk":0,"at":9}]}`), uint32(1), int64(3))
	f.Add([]byte(`{"2":[{"off":0,"chunk":1,"at":7},{"off":5,"chunk":0}],"1":[{"off":-1}]}`), uint32(2), int64(6))
	f.Fuzz(func(t *testing.T, raw []byte, c uint32, off int64) {
		var tables map[uint32][]Exit
		if json.Unmarshal(raw, &tables) != nil {
			return
		}
		chain := Chain(tables, eventline.Location{Chunk: c, Offset: off})
		if len(chain) == 0 || chain[0] != c || len(chain) > len(tables)+1 {
			t.Fatalf("chain %v from chunk %d over %d tables", chain, c, len(tables))
		}
		for i := 1; i < len(chain); i++ {
			if chain[i] >= chain[i-1] {
				t.Fatalf("chain %v does not go back", chain)
			}
		}
	})
}
