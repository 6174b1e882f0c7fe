package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// sharedTranscripts returns the shared real transcripts' directory, or
// skips the test when it is not there.
func sharedTranscripts(t *testing.T) string {
	t.Helper()
	dir := transcriptsDir("")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("the shared transcripts are not here:", err)
	}
	return dir
}

// TestSearchCorpus: the corpus is what it says: as many sessions as
// asked, every record valid JSON of its original's length and kind,
// later passes differing from the first, the same events each time a
// session is made, and the rare word in exactly the events it names.
func TestSearchCorpus(t *testing.T) {
	dir := sharedTranscripts(t)
	c, err := newSearchCorpus(dir, 10, 3, 12, 3, 2)
	require.NoError(t, err)
	require.Equal(t, 15, c.sessions())
	first, err := loadRealTranscripts(dir, 10)
	require.NoError(t, err)
	var orig []Event
	for _, tr := range first {
		orig = append(orig, tr.evs...)
	}
	require.Equal(t, orig, c.real)

	var (
		total    int64
		events   int
		stream   []Event // the real sessions' events, in order
		rareSeen int
		changed  int
	)
	for i := range c.sessions() {
		name, evs, rare := c.session(i)
		name2, evs2, rare2 := c.session(i)
		assert.Equal(t, name, name2)
		assert.Equal(t, evs, evs2, "session %d made twice", i)
		assert.Equal(t, rare, rare2)
		require.NotEmpty(t, evs, "session %d", i)
		total += payloadBytes(evs)
		events += len(evs)
		isRare := map[int]bool{}
		for _, k := range rare {
			isRare[k] = true
			assert.True(t, containsFold(evs[k].Payload, searchRareWord), "session %d event %d", i, k)
		}
		for k, ev := range evs {
			assert.True(t, json.Valid(ev.Payload), "session %d event %d: %s", i, k, ev.Payload)
			if !isRare[k] {
				assert.False(t, containsFold(ev.Payload, searchRareWord), "session %d event %d holds the rare word", i, k)
			}
		}
		rareSeen += len(rare)
		nth := i // among the real sessions, or among the synthetic ones
		if real := len(c.cuts) - 1; i >= real {
			nth = i - real
		}
		if nth%searchRareEvery == 0 {
			assert.Len(t, rare, 1, "session %d has the rare word once", i)
		} else {
			assert.Empty(t, rare, "session %d", i)
		}
		if i < len(c.cuts)-1 {
			stream = append(stream, evs...)
		}
	}
	assert.Equal(t, c.rawBytes, total)
	assert.Equal(t, c.events, events)
	assert.Equal(t, 3, rareSeen, "sessions 0 and 10 (real) and synthetic 0 (session 12)")

	require.Len(t, stream, 3*len(orig))
	for k, ev := range stream {
		o := orig[k%len(orig)]
		assert.Equal(t, o.Kind, ev.Kind)
		assert.Equal(t, o.Role, ev.Role)
		assert.Len(t, ev.Payload, len(o.Payload), "event %d keeps its length", k)
		if k < len(orig) {
			if !bytes.Equal(o.Payload, ev.Payload) {
				assert.True(t, containsFold(ev.Payload, searchRareWord), "the first pass is the transcripts but for the rare word: event %d", k)
			}
		} else if !bytes.Equal(o.Payload, ev.Payload) {
			changed++
		}
	}
	assert.Greater(t, changed, len(orig)/2, "most events of later passes have a word swapped")
}

// TestMutate: swapping words keeps any record valid JSON of the same
// length, escapes included, and swaps only letters.
func TestMutate(t *testing.T) {
	c := &searchCorpus{vocab: make([][]byte, searchMaxWord+1)}
	for n := searchMinWord; n <= searchMaxWord; n++ {
		c.vocab[n] = bytes.Repeat([]byte("Q"), n*3) // three words of n Qs
	}
	recs := [][]byte{
		[]byte(`{"text":"\u00e9tude and \\nothing \n newline \"quoted words\" here, long enough to swap","key_with_a_very_long_name_that_is_long":"x","k2":"short"}`),
		[]byte(`["\ud83d\ude00 emoji then words words words and more words here", 1, true, null, "tiny"]`),
		[]byte(`{"a":{"b":["nested strings with plenty of words in them to swap", "tab\tand\tbackslash\\\\end words"]}}`),
	}
	for seed := range uint64(200) {
		for _, rec := range recs {
			require.True(t, json.Valid(rec))
			out := c.mutate(rec, rand.New(rand.NewPCG(seed, 1)))
			require.True(t, json.Valid(out), "seed %d: %s", seed, out)
			require.Len(t, out, len(rec))
			for i := range rec {
				if rec[i] != out[i] {
					assert.True(t, isASCIILetter(rec[i]) && out[i] == 'Q', "seed %d: byte %d %q became %q", seed, i, rec[i], out[i])
				}
			}
			var a, b any
			require.NoError(t, json.Unmarshal(rec, &a))
			require.NoError(t, json.Unmarshal(out, &b))
			if m, ok := b.(map[string]any); ok && a.(map[string]any)["k2"] != nil {
				assert.Equal(t, "short", m["k2"], "short strings are left alone")
			}
		}
	}
	// Rate 0.1 of many words: some swapped.
	out := c.mutate(recs[0], rand.New(rand.NewPCG(3, 1)))
	for seed := uint64(4); bytes.Equal(out, recs[0]) && seed < 100; seed++ {
		out = c.mutate(recs[0], rand.New(rand.NewPCG(seed, 1)))
	}
	assert.Contains(t, string(out), "QQ")
}

// TestSearchWorkload runs the search workload at a tiny size on
// sessionstore and SQLite FTS5: every row has both sides' values and a
// ratio (the answers are checked inside the workload), the index ratio
// is the subject's, and the targets are reported.
func TestSearchWorkload(t *testing.T) {
	dir := sharedTranscripts(t)
	var peers []Peer
	for _, p := range allPeers() {
		if p.Name == "sessionstore" || p.Name == ftsPeerName {
			peers = append(peers, p)
		}
	}
	require.Len(t, peers, 2)
	e := &env{
		ctx: context.Background(), scratch: t.TempDir(), peers: peers, reps: 2, res: newResults(), transcripts: dir,
		sz:   sizes{SearchFiles: 9, SearchPasses: 2, SearchReal: 12, SearchSynth: 2, SearchTurns: 2, SearchQueries: 3, SearchLimit: 5},
		logf: t.Logf,
	}
	require.NoError(t, e.search())
	for _, q := range searchQueries {
		for _, key := range []string{"search/" + q.key + "-p50", "search/" + q.key + "-p99"} {
			r := e.res.byKey[key]
			require.NotNil(t, r, key)
			for _, p := range []string{"sessionstore", ftsPeerName} {
				v, ok := r.value(p)
				assert.True(t, ok, "%s: no value for %s", key, p)
				assert.Positive(t, v, "%s: %s", key, p)
			}
			_, ok := r.ratio(ftsPeerName)
			assert.True(t, ok, "%s: no ratio", key)
		}
	}
	r := e.res.byKey["search/open-ms"]
	require.NotNil(t, r)
	_, ok := r.ratio(ftsPeerName)
	assert.True(t, ok)
	r = e.res.byKey["search/index-ratio"]
	require.NotNil(t, r)
	v, ok := r.value("sessionstore")
	require.True(t, ok)
	assert.Positive(t, v)
	var b strings.Builder
	e.res.writeTargets(&b)
	assert.Contains(t, b.String(), "search, a rare word: p50 <= 1.0x SQLite FTS5's")
	assert.Contains(t, b.String(), "search index bytes <= 0.3x")
	require.Len(t, e.res.details, 1)
	assert.Contains(t, e.res.details[0], "The rare word `quixotryl` is in 3 events")
	assert.Regexp(t, "a rare word `quixotryl`: sessionstore found 3 events, FTS5 3 ", e.res.details[0])
	writeReport(io.Discard, e, machine{}, true, 0)
}

// TestSearchCheckHits: the check of an answer refuses one that misses a
// rare-word event, names one twice, puts an event in another session,
// or names an event without the words.
func TestSearchCheckHits(t *testing.T) {
	ctx := context.Background()
	s1, s2 := uuid.New(), uuid.New()
	e1, e2, e3 := uuid.New(), uuid.New(), uuid.New()
	b := &searchBuild{ids: []uuid.UUID{s1, s2}, events: [][]uuid.UUID{{e1, e2}, {e3}},
		rowid: map[uuid.UUID]int64{e1: 1, e2: 2, e3: 3}, rare: map[uuid.UUID]bool{e1: true, e3: true}}
	f, err := openFTSBuild(t.TempDir())
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.add(ctx, []ftsRow{
		{rowid: 1, session: s1, event: e1, text: "the quixotryl fix"},
		{rowid: 2, session: s1, event: e2, text: "nothing here"},
		{rowid: 3, session: s2, event: e3, text: "QUIXOTRYL again"},
	}))
	rare := searchQueries[0]
	require.Equal(t, "rare", rare.key)
	ok := []searchHit{{session: s1, event: e1}, {session: s2, event: e3}}
	require.NoError(t, b.checkHits(ctx, f, "x", rare, ok))
	require.NoError(t, b.checkHits(ctx, nil, "x", rare, ok), "without the texts")

	assert.ErrorContains(t, b.checkHits(ctx, f, "x", rare, ok[:1]), "1 hits, want the 2 events")
	assert.ErrorContains(t, b.checkHits(ctx, f, "x", rare, []searchHit{ok[0], ok[0]}), "found twice")
	assert.ErrorContains(t, b.checkHits(ctx, f, "x", rare, []searchHit{{session: s2, event: e1}, ok[1]}), "no event of that session")
	assert.ErrorContains(t, b.checkHits(ctx, f, "x", rare, []searchHit{ok[0], ok[1], {session: s1, event: e2}}), "does not hold")
	phrase := searchQuery{key: "phrase", what: "a phrase", text: `"quixotryl fix"`}
	require.NoError(t, b.checkHits(ctx, f, "x", phrase, ok[:1]))
	assert.ErrorContains(t, b.checkHits(ctx, f, "x", phrase, ok), "does not hold", "QUIXOTRYL again has the word but not the phrase")
}

// TestSessionstoreSearched: the searched peer searches while it is
// written, its searches save the index, and every event is found.
func TestSessionstoreSearched(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := openSessionstoreSearched(dir)
	require.NoError(t, err)
	w := st.(*ssSearched)
	sid, err := st.Create(ctx, "s")
	require.NoError(t, err)
	ev := fromSS(sessionstore.UserText("an error to find"))
	deadline := time.Now().Add(10 * time.Second)
	for n := 0; n < 20 || w.searchCount() < 3 && time.Now().Before(deadline); n++ {
		_, err := st.Append(ctx, sid, ev)
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, st.Close())
	assert.GreaterOrEqual(t, w.searchCount(), int64(3))
	segs, err := os.ReadDir(filepath.Join(dir, searchDir))
	require.NoError(t, err)
	assert.NotEmpty(t, segs, "the searches saved the index")

	s, err := sessionstore.Open(dir, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer s.Close()
	hits, err := ssSearch(ctx, s, "error", 1000)
	require.NoError(t, err)
	tree, err := s.Tree(ctx, sid)
	require.NoError(t, err)
	assert.Len(t, hits, len(tree))
}
