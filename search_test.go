package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// searchWords is the small vocabulary of the randomized tests: words
// common and rare, so that queries have many hits and few.
var searchWords = []string{"migration", "Postgres", "index", "fix", "the", "a", "users", "table",
	"café", "naïve", "foo_bar", "x1", "rollback", "deploy", "test", "failed", "ok", "zebra"}

func randomText(rng *rand.Rand) string {
	n := 1 + rng.IntN(12)
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString([]string{" ", ", ", ". ", "\n", "-"}[rng.IntN(5)])
		}
		w := searchWords[min(rng.IntN(len(searchWords)), rng.IntN(len(searchWords)))] // skewed to the first
		if rng.IntN(4) == 0 {
			w = strings.ToUpper(w)
		}
		b.WriteString(w)
	}
	return b.String()
}

func randomEvent(rng *rand.Rand) Event {
	switch rng.IntN(4) {
	case 0:
		return UserText(randomText(rng))
	case 1:
		return AssistantText(randomText(rng))
	case 2:
		return ToolCallEvent(ToolCall{CallID: fmt.Sprint(rng.IntN(100)), Name: "bash", Arguments: []byte(fmt.Sprintf(`{"cmd":%q}`, randomText(rng)))})
	default:
		return ToolResultEvent(ToolResult{CallID: fmt.Sprint(rng.IntN(100)), Output: randomText(rng)})
	}
}

func randomQuery(rng *rand.Rand) SearchQuery {
	var parts []string
	for range 1 + rng.IntN(2) {
		if rng.IntN(3) == 0 {
			parts = append(parts, `"`+searchWords[rng.IntN(len(searchWords))]+" "+searchWords[rng.IntN(len(searchWords))]+`"`)
		} else {
			parts = append(parts, searchWords[rng.IntN(len(searchWords))])
		}
	}
	q := SearchQuery{Text: strings.Join(parts, " "), Query: Query{Limit: 1 + rng.IntN(30)}}
	if rng.IntN(4) == 0 {
		q.Roles = []Role{RoleUser, RoleTool}[rng.IntN(2):]
	}
	if rng.IntN(4) == 0 {
		q.Kinds = []Kind{KindToolResult}
	}
	if rng.IntN(4) == 0 {
		q.WorkingDir = "/w1"
	}
	return q
}

// requireSameAsScan checks that Search (the index) answers q as the scan
// of every record does.
func requireSameAsScan(t *testing.T, s *Store, q SearchQuery, msg string) []Hit {
	t.Helper()
	ctx := context.Background()
	p, err := parseSearch(q)
	require.NoError(t, err)
	want, err := s.searchScan(ctx, q, p)
	require.NoError(t, err)
	var got []Hit
	for h, err := range s.Search(ctx, q) {
		require.NoError(t, err)
		got = append(got, h)
	}
	require.Equal(t, len(want), len(got), "%s: query %q", msg, q.Text)
	for i := range want {
		assert.Equal(t, want[i], got[i], "%s: query %q hit %d", msg, q.Text, i)
	}
	return got
}

func fillSearchStore(t *testing.T, s *Store, rng *rand.Rand, sessions, events int) []uuid.UUID {
	ctx := context.Background()
	var ids []uuid.UUID
	for i := range sessions {
		m, err := s.Create(ctx, Meta{WorkingDir: fmt.Sprintf("/w%d", i%2)})
		require.NoError(t, err)
		ids = append(ids, m.ID)
	}
	for range events {
		_, err := s.Append(ctx, ids[rng.IntN(len(ids))], randomEvent(rng))
		require.NoError(t, err)
	}
	return ids
}

// TestSearchMatchesScan: on randomized sessions, Search through the index
// yields exactly what a scan of every record yields, as events are added
// between queries, and after a reopen that reads the index's files.
func TestSearchMatchesScan(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		m := vfs.NewMemFS()
		s := openMem(t, m, Options{ChunkSize: 4096, BlobThreshold: 512})
		ids := fillSearchStore(t, s, rng, 5, 150)
		nonEmpty := 0
		for round := range 6 {
			for range 10 {
				if len(requireSameAsScan(t, s, randomQuery(rng), fmt.Sprintf("seed %d round %d", seed, round))) > 0 {
					nonEmpty++
				}
			}
			for range 20 {
				_, err := s.Append(ctx, ids[rng.IntN(len(ids))], randomEvent(rng))
				require.NoError(t, err)
			}
			if round == 3 {
				require.NoError(t, s.Close())
				s = openMem(t, m, Options{ChunkSize: 4096, BlobThreshold: 512})
			}
		}
		require.NoError(t, s.Close())
		assert.Greater(t, nonEmpty, 10, "seed %d: the queries find something", seed)
		names, err := m.ReadDir(filepath.Join(memRoot, searchDir))
		require.NoError(t, err)
		assert.NotEmpty(t, names, "the index was saved")
	}
}

// TestSearchIndexDamage: index files truncated, flipped or removed give,
// after a reopen, the same answers (the index is rebuilt), never an error.
func TestSearchIndexDamage(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 3))
	m := vfs.NewMemFS()
	o := Options{ChunkSize: 4096}
	s := openMem(t, m, o)
	ids := fillSearchStore(t, s, rng, 4, 120)
	queries := make([]SearchQuery, 12)
	for i := range queries {
		queries[i] = randomQuery(rng)
	}
	for _, q := range queries {
		requireSameAsScan(t, s, q, "before")
	}
	_, err := s.Append(ctx, ids[0], UserText("zebra migration again"))
	require.NoError(t, err)
	requireSameAsScan(t, s, queries[0], "second segment")
	require.NoError(t, s.Close())
	dir := filepath.Join(memRoot, searchDir)
	damages := []func(b []byte) []byte{
		func(b []byte) []byte { return b[:len(b)/2] },
		func(b []byte) []byte { c := append([]byte(nil), b...); c[len(c)/3] ^= 0x40; return c },
		func(b []byte) []byte { return nil },
		func(b []byte) []byte { return append(b, 'x') },
	}
	for di, damage := range damages {
		names, err := m.ReadDir(dir)
		require.NoError(t, err)
		hit := false
		for _, n := range names {
			if !strings.HasPrefix(n, "seg-") {
				continue
			}
			p := filepath.Join(dir, n)
			b, err := vfs.ReadFile(m, p)
			require.NoError(t, err)
			f, err := m.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0o600)
			require.NoError(t, err)
			_, err = f.Write(damage(b))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			hit = true
			break
		}
		require.True(t, hit, "damage %d: a segment to damage", di)
		s = openMem(t, m, o)
		for _, q := range queries {
			requireSameAsScan(t, s, q, fmt.Sprintf("damage %d", di))
		}
		require.NoError(t, s.Close())
	}
	names, err := m.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		require.NoError(t, m.Remove(filepath.Join(dir, n)))
	}
	s = openMem(t, m, o)
	requireSameAsScan(t, s, queries[1], "removed")
	require.NoError(t, s.Close())
}

// TestSearchHostileQueries: refused queries are ErrInvalidSearch, yielded
// once; odd ones that parse find nothing or what a scan finds.
func TestSearchHostileQueries(t *testing.T) {
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	_, err := s.Append(ctx, id, UserText("select * from users where id = 1; a+b (c|d)"))
	require.NoError(t, err)
	bad := []SearchQuery{
		{Text: ""}, {Text: "   "}, {Text: "!!! ... ???"}, {Text: `"unclosed phrase`},
		{Text: strings.Repeat("a ", 1<<19)}, {Text: strings.Repeat("x", 5000)},
		{Text: "\xff\xfe"}, {Text: `.*`}, {Text: "users", Query: Query{Limit: -1}},
		{Text: "users", Kinds: []Kind{"nope"}}, {Text: "users", Roles: []Role{"system"}},
		{Text: strings.Repeat("w ", 17)},
	}
	for _, q := range bad {
		n := 0
		for _, err := range s.Search(ctx, q) {
			n++
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidSearch, "%.40q", q.Text)
		}
		assert.Equal(t, 1, n, "%.40q: one error", q.Text)
	}
	for _, text := range []string{`(c|d)`, `users.*`, `"" users`, `a+b`, `id=1`, `\d+`} {
		requireSameAsScan(t, s, SearchQuery{Text: text}, "odd")
	}
	got := requireSameAsScan(t, s, SearchQuery{Text: `(c|d)`}, "regex-like")
	assert.Len(t, got, 1, "the words c and d are found as words")
}

// TestSearchCrashPoints: a power cut at every mutating operation of a
// workload of appends and Searches (index writes among them) leaves a
// store in which every acknowledged event is found by a Search for its
// own unique word.
func TestSearchCrashPoints(t *testing.T) {
	ctx := context.Background()
	run := func(m *vfs.MemFS, acked *[]string) {
		s, err := Open(memRoot, &Options{fs: m, ChunkSize: 2048})
		if err != nil {
			return
		}
		defer s.Close()
		meta, err := s.Create(ctx, Meta{})
		if err != nil {
			return
		}
		for i := range 12 {
			w := fmt.Sprintf("word%dx", i)
			if _, err := s.Append(ctx, meta.ID, UserText("common "+w)); err != nil {
				return
			}
			*acked = append(*acked, w)
			if i%3 == 2 {
				for range s.Search(ctx, SearchQuery{Text: "common"}) {
				}
			}
		}
	}
	var total []string
	probe := vfs.NewMemFS()
	n := 0
	probe.SetFault(func(op vfs.Op, _ string) error {
		if vfs.Mutating(op) {
			n++
		}
		return nil
	})
	run(probe, &total)
	require.Len(t, total, 12)
	for k := 1; k <= n; k += max(1, n/60) {
		m := vfs.NewMemFS()
		c := 0
		m.SetFault(func(op vfs.Op, _ string) error {
			if vfs.Mutating(op) {
				c++
				if c == k {
					return vfs.ErrPowerLoss
				}
			}
			return nil
		})
		var acked []string
		run(m, &acked)
		m.PowerOff()
		for _, mode := range []vfs.CrashMode{vfs.KeepSynced, vfs.KeepAll} {
			cm := m.CrashClone(mode, uint64(k))
			s, err := Open(memRoot, &Options{fs: cm, ChunkSize: 2048})
			if err != nil {
				require.Empty(t, acked, "crash point %d: the store opens once something was acknowledged", k)
				continue
			}
			for _, w := range acked {
				found := 0
				for _, err := range s.Search(ctx, SearchQuery{Text: w}) {
					require.NoError(t, err)
					found++
				}
				assert.Equal(t, 1, found, "crash point %d (%v): %s acknowledged and not found", k, mode, w)
			}
			require.NoError(t, s.Close())
		}
	}
}

func TestSearchErrClosed(t *testing.T) {
	_, s, _ := memSession(t, Options{})
	require.NoError(t, s.Close())
	for _, err := range s.Search(context.Background(), SearchQuery{Text: "x"}) {
		assert.True(t, errors.Is(err, ErrClosed), "%v", err)
	}
}

// BenchmarkSearch: a query of a rare word, a common word and a phrase on
// 40 sessions of 100 random events, through the index (caught up, the
// usual case) and by the scan, side by side; scan/index is the speedup.
func BenchmarkSearch(b *testing.B) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 5))
	dir := b.TempDir()
	s, err := Open(dir, nil)
	require.NoError(b, err)
	defer s.Close()
	for range 40 {
		m, err := s.Create(ctx, Meta{})
		require.NoError(b, err)
		evs := make([]Event, 100)
		for i := range evs {
			evs[i] = randomEvent(rng)
		}
		_, err = s.AppendBatch(ctx, m.ID, evs...)
		require.NoError(b, err)
	}
	for _, text := range []string{"zebra", "migration", `"the migration"`} {
		q := SearchQuery{Text: text}
		p, err := parseSearch(q)
		require.NoError(b, err)
		for range s.Search(ctx, q) { // catch up
		}
		b.Run(strings.Trim(text, `"`)+"/index", func(b *testing.B) {
			for b.Loop() {
				for _, err := range s.Search(ctx, q) {
					require.NoError(b, err)
				}
			}
		})
		b.Run(strings.Trim(text, `"`)+"/scan", func(b *testing.B) {
			for b.Loop() {
				_, err := s.searchScan(ctx, q, p)
				require.NoError(b, err)
			}
		})
	}
}

// dirBytes is the total size of the files under dir whose path holds part.
func dirBytes(tb testing.TB, dir, part string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(path, part) {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	require.NoError(tb, err)
	return n
}

// BenchmarkSearchClaudeCode stores each shared Claude Code transcript as
// a session (each line a custom event), and reports the index's size
// against the stored chunks and blobs (index/stored), then times queries
// of a rare word, a common word and a phrase. Skipped without the shared
// data.
func BenchmarkSearchClaudeCode(b *testing.B) {
	data := sharedDataDir()
	if data == "" {
		b.Skip("no shared data (../shared/data, $SESSIONSTORE_SHARED_DATA or /work/shared/data)")
	}
	ctx := context.Background()
	dir := claudeCodeStore(b, data)
	s, err := Open(dir, nil)
	require.NoError(b, err)
	defer s.Close()
	for range s.Search(ctx, SearchQuery{Text: "x"}) { // builds and saves the index
	}
	stored := dirBytes(b, filepath.Join(dir, sessionsDir), string(filepath.Separator)+chunksDir+string(filepath.Separator)) +
		dirBytes(b, filepath.Join(dir, sessionsDir), string(filepath.Separator)+"blobs"+string(filepath.Separator))
	index := dirBytes(b, filepath.Join(dir, searchDir), "seg-")
	metas, err := s.List(ctx)
	require.NoError(b, err)
	b.Logf("%d sessions, stored %d bytes, index %d bytes", len(metas), stored, index)
	for _, text := range []string{"supercalifragilistic", "file", `"tool_use"`, `"the file"`} {
		q := SearchQuery{Text: text}
		b.Run(strings.Trim(text, `"`), func(b *testing.B) {
			for b.Loop() {
				for _, err := range s.Search(ctx, q) {
					require.NoError(b, err)
				}
			}
			b.ReportMetric(float64(index)/float64(stored), "index/stored")
		})
	}
}

// TestSearchDeleteReadOnlyEncrypted: a deleted session's events are not
// found; a read-only Store searches and writes nothing; an encrypted
// session's words are found and never written to the index's files.
func TestSearchDeleteReadOnlyEncrypted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	keys := testKeys(t, "k1", 7)
	s, err := Open(dir, &Options{Keys: keys})
	require.NoError(t, err)
	enc, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	require.True(t, enc.Encrypted)
	_, err = s.Append(ctx, enc.ID, UserText("secretword shared"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = Open(dir, nil) // no keys: plain sessions
	require.NoError(t, err)
	plain, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	gone, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	_, err = s.Append(ctx, plain.ID, UserText("plainword shared"))
	require.NoError(t, err)
	_, err = s.Append(ctx, gone.ID, UserText("goneword shared"))
	require.NoError(t, err)
	count := func(s *Store, text string) int {
		n := 0
		for _, err := range s.Search(ctx, SearchQuery{Text: text}) {
			require.NoError(t, err)
			n++
		}
		return n
	}
	assert.Equal(t, 2, count(s, "shared"), "the encrypted session is skipped without its key")
	require.NoError(t, s.Delete(ctx, gone.ID))
	assert.Equal(t, 0, count(s, "goneword"))
	assert.Equal(t, 1, count(s, "shared"))
	require.NoError(t, s.Close())

	s, err = Open(dir, &Options{Keys: keys})
	require.NoError(t, err)
	// A plain session's new event beside the encrypted one's: the index
	// this Search writes holds both sessions' documents, and must leave
	// out the encrypted one's.
	_, err = s.Append(ctx, plain.ID, UserText("keyedword"))
	require.NoError(t, err)
	assert.Equal(t, 1, count(s, "secretword"))
	assert.Equal(t, 1, count(s, "keyedword"))
	assert.Equal(t, 2, count(s, "shared"))
	require.NoError(t, s.Close())
	err = filepath.WalkDir(filepath.Join(dir, searchDir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.NotContains(t, string(b), "ecretword", "%s holds an encrypted session's word", path)
		return nil
	})
	require.NoError(t, err)

	w, err := Open(dir, nil)
	require.NoError(t, err)
	_, err = w.Append(ctx, plain.ID, UserText("laterword"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	before := dirBytes(t, filepath.Join(dir, searchDir), "seg-")
	names := func() []string {
		es, err := os.ReadDir(filepath.Join(dir, searchDir))
		require.NoError(t, err)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	was := names()
	r, err := Open(dir, &Options{ReadOnly: true})
	require.NoError(t, err)
	assert.Equal(t, 1, count(r, "laterword"), "a read-only Store catches up in memory")
	assert.Equal(t, 1, count(r, "plainword"))
	require.NoError(t, r.Close())
	assert.Equal(t, was, names(), "a read-only Store writes no index file")
	assert.Equal(t, before, dirBytes(t, filepath.Join(dir, searchDir), "seg-"))
}

// BenchmarkSearchManySessions: a rare word among 1,000 sessions of 20
// events, the index caught up: what a query costs per session of the
// store (the listing of the sessions it selects, then the postings).
func BenchmarkSearchManySessions(b *testing.B) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 9))
	s, err := Open(b.TempDir(), nil)
	require.NoError(b, err)
	defer s.Close()
	for range 1000 {
		m, err := s.Create(ctx, Meta{})
		require.NoError(b, err)
		evs := make([]Event, 20)
		for i := range evs {
			evs[i] = randomEvent(rng)
		}
		_, err = s.AppendBatch(ctx, m.ID, evs...)
		require.NoError(b, err)
	}
	for _, text := range []string{"zebra", "migration"} {
		q := SearchQuery{Text: text}
		for range s.Search(ctx, q) { // catch up
		}
		b.Run(text, func(b *testing.B) {
			for b.Loop() {
				for _, err := range s.Search(ctx, q) {
					require.NoError(b, err)
				}
			}
		})
	}
}

// TestSearchListingFollowsChanges: a Search answers from the listing the
// previous one read while the catalogue is unchanged; a session created,
// its metadata changed or deleted, in this Store or by a writer beside a
// read-only one, is searched (or not) by the next Search.
func TestSearchListingFollowsChanges(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w, err := Open(dir, nil)
	require.NoError(t, err)
	defer w.Close()
	r, err := Open(dir, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer r.Close()
	sessions := func(s *Store, q SearchQuery) []uuid.UUID {
		t.Helper()
		q.Text = "zebra"
		var got []uuid.UUID
		for h, err := range s.Search(ctx, q) {
			require.NoError(t, err)
			got = append(got, h.Session)
		}
		return got
	}
	newSession := func() uuid.UUID {
		m, err := w.Create(ctx, Meta{WorkingDir: "/a"})
		require.NoError(t, err)
		_, err = w.Append(ctx, m.ID, UserText("a zebra"))
		require.NoError(t, err)
		require.NoError(t, w.Flush(ctx, m.ID))
		return m.ID
	}
	s1 := newSession()
	for _, s := range []*Store{w, r} {
		assert.Equal(t, []uuid.UUID{s1}, sessions(s, SearchQuery{}))
		assert.Equal(t, []uuid.UUID{s1}, sessions(s, SearchQuery{}), "asked again")
	}

	s2 := newSession()
	for _, s := range []*Store{w, r} {
		assert.ElementsMatch(t, []uuid.UUID{s1, s2}, sessions(s, SearchQuery{}), "a session created")
	}

	_, err = w.UpdateMeta(ctx, s2, func(m *Meta) { m.WorkingDir = "/b" })
	require.NoError(t, err)
	for _, s := range []*Store{w, r} {
		assert.Equal(t, []uuid.UUID{s2}, sessions(s, SearchQuery{Query: Query{WorkingDir: "/b"}}), "metadata changed")
		assert.Equal(t, []uuid.UUID{s1}, sessions(s, SearchQuery{Query: Query{WorkingDir: "/a"}}), "metadata changed")
	}

	require.NoError(t, w.Delete(ctx, s1))
	for _, s := range []*Store{w, r} {
		assert.Equal(t, []uuid.UUID{s2}, sessions(s, SearchQuery{}), "a session deleted")
	}
}

// claudeCodeStore writes the shared transcripts under data into a new
// store, one session each, each line a custom event, closes it and
// returns its root.
func claudeCodeStore(b *testing.B, data string) string {
	ctx := context.Background()
	dir := b.TempDir()
	s, err := Open(dir, nil)
	require.NoError(b, err)
	sessions := map[string]uuid.UUID{}
	claudeCodeLines(b, data, func(path string, line []byte) {
		id, ok := sessions[path]
		if !ok {
			m, err := s.Create(ctx, Meta{Name: filepath.Base(path)})
			require.NoError(b, err)
			id, sessions[path] = m.ID, m.ID
		}
		_, err := s.Append(ctx, id, NewEvent(KindCustom, RoleNone, json.RawMessage(line)))
		require.NoError(b, err)
	})
	require.NoError(b, s.Close())
	return dir
}
