package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/internal/search"
)

// The search workload: the corpus (searchcorpus.go) appended to a
// sessionstore root, whose search index is kept as events are appended,
// and the same events' text put into a SQLite FTS5 table (searchfts.go);
// then the same three queries on both, timed side by side, each answer
// checked; and the bytes of the store's index against the bytes of its
// stored data. See README.md.

// ftsPeerName is the search workload's peer.
const ftsPeerName = "sqlite-fts5"

// searchQuery is one of the timed queries: the same text is the store's
// SearchQuery.Text and FTS5's MATCH expression.
type searchQuery struct {
	key, what, text string
}

var searchQueries = []searchQuery{
	{"rare", "a rare word", searchRareWord},
	{"common", "a common word", "error"},
	{"phrase", "a phrase", `"the file"`},
}

// searchTimeBudget bounds the time one side spends on one query in one
// repetition: it stops after SearchQueries runs or once the budget is
// spent, whichever comes first, but runs at least searchMinRuns.
const (
	searchTimeBudget = 20 * time.Second
	searchMinRuns    = 5
)

// searchBuildWorkers is how many goroutines append the corpus's sessions
// to the store at once.
const searchBuildWorkers = 4

// searchBatch bounds one AppendBatch of the build: at most this many
// events, or 4 MiB of records.
const searchBatch = 256

func (e *env) search() error {
	sz := e.sz
	c, err := newSearchCorpus(e.transcripts, sz.SearchFiles, sz.SearchPasses, sz.SearchReal, sz.SearchSynth, sz.SearchTurns)
	if err != nil {
		return err
	}
	withFTS := e.has(ftsPeerName)
	e.logf("  corpus: %d sessions, %s events, %.0f MiB of records", c.sessions(), thousands(int64(c.events)), mib(c.rawBytes))

	ssDir, err := e.freshDir("search", "sessionstore")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ssDir)
	b, err := e.buildSearchStore(c, ssDir)
	if err != nil {
		return fmt.Errorf("sessionstore: build: %w", err)
	}
	e.logf("  sessionstore: appended in %s, indexed by the first Search in %s", b.took.Round(100*time.Millisecond), b.catchUp.Round(100*time.Millisecond))
	snap, err := measureDir(ssDir)
	if err != nil {
		return err
	}
	indexBytes, dataBytes := searchParts(snap)

	var (
		fts      *ftsIndex
		ftsDir   string
		ftsTook  time.Duration
		ftsSizes ftsSizes
	)
	if withFTS {
		if ftsDir, err = e.freshDir("search", ftsPeerName); err != nil {
			return err
		}
		defer os.RemoveAll(ftsDir)
		t0 := time.Now()
		if err := e.buildFTS(c, b, ftsDir); err != nil {
			return fmt.Errorf("%s: build: %w", ftsPeerName, err)
		}
		ftsTook = time.Since(t0)
		e.logf("  %s: built in %s", ftsPeerName, ftsTook.Round(100*time.Millisecond))
		if fts, err = openFTSRead(ftsDir, true); err != nil {
			return err
		}
		defer fts.Close()
		if ftsSizes, err = fts.sizes(e.ctx); err != nil {
			return err
		}
	}

	// Open and first query, each time in a store or database just
	// opened: what the inspector's search does.
	if err := e.searchOpens(ssDir, ftsDir); err != nil {
		return err
	}

	heap0 := heapInUse()
	st, err := sessionstore.Open(ssDir, &sessionstore.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer st.Close()
	ss := func(ctx context.Context, text string, limit int) ([]searchHit, error) {
		return ssSearch(ctx, st, text, limit)
	}
	if _, err := ss(e.ctx, searchRareWord, 1); err != nil {
		return fmt.Errorf("sessionstore: %w", err)
	}
	heapIndex := heapInUse() - heap0
	var ftsSearch func(ctx context.Context, text string, limit int) ([]searchHit, error)
	if fts != nil {
		ftsSearch = fts.search
	}

	// The answers, checked once before the timing: the rare word's
	// events exactly (every hit, by a limit above their number); for
	// every query, each hit's event holds the words, and a side's hits
	// are as many as the limit allows.
	counts := map[string]map[string]int{} // query key -> side -> hits with a large limit
	for _, q := range searchQueries {
		counts[q.key] = map[string]int{}
		for _, side := range []struct {
			name string
			fn   func(context.Context, string, int) ([]searchHit, error)
		}{{"sessionstore", ss}, {ftsPeerName, ftsSearch}} {
			if side.fn == nil {
				continue
			}
			hits, err := side.fn(e.ctx, q.text, sessionstore.MaxSearchLimit)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", side.name, q.what, err)
			}
			counts[q.key][side.name] = len(hits)
			if err := b.checkHits(e.ctx, fts, side.name, q, hits); err != nil {
				return err
			}
		}
	}

	limit := sz.SearchLimit
	var notes []string
	for _, q := range searchQueries {
		p50 := e.res.row("search/"+q.key+"-p50", fmt.Sprintf("search %s (%s), %d hits at most: p50", q.what, q.text, limit), "ms", false, "sessionstore")
		p99 := e.res.row("search/"+q.key+"-p99", fmt.Sprintf("search %s (%s), %d hits at most: p99", q.what, q.text, limit), "ms", false, "sessionstore")
		want := min(limit, counts[q.key]["sessionstore"])
		runs := map[string][]int{}
		for rep := range e.reps {
			sides := []string{"sessionstore", ftsPeerName}
			if rep%2 == 1 {
				slices.Reverse(sides)
			}
			for _, side := range sides {
				fn := ss
				if side == ftsPeerName {
					if ftsSearch == nil {
						continue
					}
					fn = ftsSearch
				}
				lats, err := timeSearch(e.ctx, "search/"+q.key+"/"+side, sz.SearchQueries, func(ctx context.Context) error {
					hits, err := fn(ctx, q.text, limit)
					if err == nil && side == "sessionstore" && len(hits) != want {
						err = fmt.Errorf("%d hits, want %d", len(hits), want)
					}
					return err
				})
				if err != nil {
					return fmt.Errorf("%s: %s: %w", side, q.what, err)
				}
				p50.set(side, rep, percentile(lats, 50))
				p99.set(side, rep, percentile(lats, 99))
				runs[side] = append(runs[side], len(lats))
			}
		}
		line := fmt.Sprintf("%s `%s`: sessionstore found %s events", q.what, q.text, thousands(int64(counts[q.key]["sessionstore"])))
		if withFTS {
			line += fmt.Sprintf(", FTS5 %s", thousands(int64(counts[q.key][ftsPeerName])))
		}
		line += fmt.Sprintf(" (asking for at most %s); timed runs per repetition: sessionstore %v", thousands(sessionstore.MaxSearchLimit), runs["sessionstore"])
		if withFTS {
			line += fmt.Sprintf(", FTS5 %v", runs[ftsPeerName])
		}
		notes = append(notes, line)
	}

	ratio := e.res.row("search/index-ratio", "search index bytes / stored data bytes (chunks and blobs, closed)", "x data", false, "sessionstore")
	ratio.set("sessionstore", 0, float64(indexBytes)/float64(dataBytes))

	var d strings.Builder
	fmt.Fprintf(&d, "Search: %d sessions, %s events, %s bytes of records (%.0f MiB): the %d shared real transcripts under %s (%s events) read %s, each time after the first with one word in ten of the longer strings swapped for another word of the same length from the transcripts, as one stream cut into %d sessions of about equal bytes; and %d synthetic coding sessions of %d turns. The rare word `%s` is in %d events (one in every %dth session).\n\n",
		c.sessions(), thousands(int64(c.events)), thousands(c.rawBytes), mib(c.rawBytes), c.files, e.transcripts, thousands(int64(len(c.real))), times(c.passes), len(c.cuts)-1, c.synth, c.turns, searchRareWord, len(b.rare), searchRareEvery)
	fmt.Fprintf(&d, "- sessionstore, default options: appended in %.1f s (Create, AppendBatch of at most %d events, from %d goroutines), indexed by the first Search in %.1f s, closed, then opened read-only for the queries (the Go heap in use grew by %.0f MiB from before that Open to after its first Search, a GC before each count). Closed: %s bytes in all; stored data (chunks, blobs) %s bytes (%.3fx the records); search index %s bytes (%.3fx the stored data, %.3fx the records)\n",
		b.took.Seconds(), searchBatch, searchBuildWorkers, b.catchUp.Seconds(), mib(heapIndex), thousands(snap.apparent), thousands(dataBytes), float64(dataBytes)/float64(c.rawBytes), thousands(indexBytes), float64(indexBytes)/float64(dataBytes), float64(indexBytes)/float64(c.rawBytes))
	fmt.Fprintf(&d, "- %s\n", snap.partsLine("sessionstore by part", c.rawBytes))
	if withFTS {
		fmt.Fprintf(&d, "- SQLite FTS5 (modernc.org/sqlite, one table, one row per event, one transaction per session, then 'optimize'): built in %.1f s; inverted index (fts_data, fts_idx) %s bytes (%.3fx the records), text as stored (fts_content) %s bytes, other %s bytes. Queries: `SELECT session, event, %s, rank FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT ?` (bm25, best first, as Search yields best first), the database opened read-only\n",
			ftsTook.Seconds(), thousands(ftsSizes.index), float64(ftsSizes.index)/float64(c.rawBytes), thousands(ftsSizes.content), thousands(ftsSizes.other), ftsSnippet)
	}
	for _, n := range notes {
		fmt.Fprintf(&d, "- %s\n", n)
	}
	e.res.detail("%s", d.String())
	return nil
}

// searchOpens is the open-and-query row: per repetition, searchOpenRuns
// times on each side, a store (or database) opened read-only, the rare
// word asked for, and closed; the median run. ftsDir is "" without the
// FTS5 peer.
func (e *env) searchOpens(ssDir, ftsDir string) error {
	r := e.res.row("search/open-ms", fmt.Sprintf("open read-only + search a rare word (%s), %d hits at most", searchRareWord, e.sz.SearchLimit), "ms", false, "sessionstore")
	for rep := range e.reps {
		sides := []string{"sessionstore", ftsPeerName}
		switch {
		case ftsDir == "":
			sides = sides[:1]
		case rep%2 == 1:
			slices.Reverse(sides)
		}
		for _, side := range sides {
			var ms []float64
			for range searchOpenRuns {
				var (
					hits []searchHit
					err  error
					d    time.Duration
				)
				timed(e.ctx, "search/open/"+side, func(ctx context.Context) {
					t0 := time.Now()
					if side == ftsPeerName {
						var f *ftsIndex
						if f, err = openFTSRead(ftsDir, true); err != nil {
							return
						}
						hits, err = f.search(ctx, searchRareWord, e.sz.SearchLimit)
						err = errors.Join(err, f.Close())
					} else {
						var st *sessionstore.Store
						if st, err = sessionstore.Open(ssDir, &sessionstore.Options{ReadOnly: true}); err != nil {
							return
						}
						hits, err = ssSearch(ctx, st, searchRareWord, e.sz.SearchLimit)
						err = errors.Join(err, st.Close())
					}
					d = time.Since(t0)
				})
				if err != nil {
					return fmt.Errorf("%s: open and search: %w", side, err)
				}
				if len(hits) == 0 {
					return fmt.Errorf("%s: open and search: no hit for %s", side, searchRareWord)
				}
				ms = append(ms, float64(d.Nanoseconds())/1e6)
			}
			r.set(side, rep, median(ms))
		}
	}
	return nil
}

// searchOpenRuns is how many opens and queries each side makes per
// repetition (the median counts).
const searchOpenRuns = 3

// heapInUse returns the bytes of live heap objects after a GC.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// searchedEvery is how often the sessionstore-searched peer searches its
// store while the append workloads write it.
const searchedEvery = 50 * time.Millisecond

// ssSearched is sessionstore (default options) with a goroutine that,
// from Open to Close, runs a Search for a common word (20 hits at most)
// every searchedEvery: each one brings the search index up to date with
// the events appended since the one before and saves it, as a harness
// whose user searches while an agent works. It is the append workloads'
// sessionstore-searched peer: their throughput beside the plain
// subject's is what indexing costs the appends.
type ssSearched struct {
	ssStore
	stop, done chan struct{}
	searches   atomic.Int64
	err        error // set before done is closed
}

// searchCount is the number of searches run so far.
func (w *ssSearched) searchCount() int64 { return w.searches.Load() }

func openSessionstoreSearched(dir string) (Store, error) {
	s, err := sessionstore.Open(dir, nil)
	if err != nil {
		return nil, err
	}
	w := &ssSearched{ssStore: ssStore{s}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w, nil
}

func (w *ssSearched) loop() {
	defer close(w.done)
	t := time.NewTicker(searchedEvery)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if _, err := ssSearch(context.Background(), w.s, "error", 20); err != nil {
			w.err = fmt.Errorf("search while appending: %w", err)
			return
		}
		w.searches.Add(1)
	}
}

// Close stops the searches, then closes the store; a Search's error is
// returned.
func (w *ssSearched) Close() error {
	close(w.stop)
	<-w.done
	return errors.Join(w.err, w.ssStore.Close())
}

// times says how many times: once, twice, 3 times.
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// ssSearch runs a query on the store and returns its hits.
func ssSearch(ctx context.Context, st *sessionstore.Store, text string, limit int) ([]searchHit, error) {
	var out []searchHit
	q := sessionstore.SearchQuery{Text: text}
	q.Limit = limit
	for h, err := range st.Search(ctx, q) {
		if err != nil {
			return nil, err
		}
		out = append(out, searchHit{session: h.Session, event: h.Event, snippet: h.Snippet, rank: h.Rank})
	}
	return out, nil
}

// timeSearch runs fn up to n times (at least searchMinRuns, and no more
// once searchTimeBudget is spent) after one untimed run, under the pprof
// label timed=label, and returns each run's time in milliseconds, sorted.
func timeSearch(ctx context.Context, label string, n int, fn func(context.Context) error) ([]float64, error) {
	if err := fn(ctx); err != nil {
		return nil, err
	}
	var (
		lats []float64
		err  error
	)
	timed(ctx, label, func(ctx context.Context) {
		start := time.Now()
		for i := 0; i < n && (i < searchMinRuns || time.Since(start) < searchTimeBudget); i++ {
			t0 := time.Now()
			if err = fn(ctx); err != nil {
				return
			}
			lats = append(lats, float64(time.Since(t0).Nanoseconds())/1e6)
		}
	})
	slices.Sort(lats)
	return lats, err
}

// searchBuild is what building the store recorded.
type searchBuild struct {
	took    time.Duration       // the appends
	catchUp time.Duration       // the first Search, which indexes them
	ids     []uuid.UUID         // per session, its id
	events  [][]uuid.UUID       // per session, its events' ids in order
	rowid   map[uuid.UUID]int64 // event id -> its FTS row (the event's number in the corpus)
	rare    map[uuid.UUID]bool  // the events holding the rare word
}

// buildSearchStore appends the corpus to a new store at dir, each session
// from one of searchBuildWorkers goroutines, runs one Search (which
// indexes every event), then closes it.
func (e *env) buildSearchStore(c *searchCorpus, dir string) (*searchBuild, error) {
	n := c.sessions()
	b := &searchBuild{ids: make([]uuid.UUID, n), events: make([][]uuid.UUID, n), rowid: map[uuid.UUID]int64{}, rare: map[uuid.UUID]bool{}}
	st, err := sessionstore.Open(dir, nil)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	t0 := time.Now()
	err = parallel(searchBuildWorkers, n, func(i int) error {
		name, evs, rare := c.session(i)
		m, err := st.Create(e.ctx, sessionstore.Meta{Name: name})
		if err != nil {
			return err
		}
		ids := make([]uuid.UUID, 0, len(evs))
		for start := 0; start < len(evs); {
			end, bytes := start, 0
			for end < len(evs) && end-start < searchBatch && (end == start || bytes+len(evs[end].Payload) <= 4<<20) {
				bytes += len(evs[end].Payload)
				end++
			}
			in := make([]sessionstore.Event, end-start)
			for k := range in {
				in[k] = toSS(evs[start+k])
			}
			out, err := st.AppendBatch(e.ctx, m.ID, in...)
			if err != nil {
				return fmt.Errorf("session %d: %w", i, err)
			}
			for _, ev := range out {
				ids = append(ids, ev.ID)
			}
			start = end
		}
		mu.Lock()
		defer mu.Unlock()
		b.ids[i] = m.ID
		b.events[i] = ids
		for _, k := range rare {
			b.rare[ids[k]] = true
		}
		return nil
	})
	b.took = time.Since(t0)
	if err == nil {
		// The index catches up in the first Search (appends only note
		// the sessions they change): it reads every record once.
		t1 := time.Now()
		_, err = ssSearch(e.ctx, st, searchRareWord, 1)
		b.catchUp = time.Since(t1)
	}
	if err := errors.Join(err, st.Close()); err != nil {
		return nil, err
	}
	var row int64
	for _, ids := range b.events {
		for _, id := range ids {
			row++
			b.rowid[id] = row
		}
	}
	return b, nil
}

// buildFTS puts every event's text into a new FTS5 table at dir, one
// transaction per session, with the ids the store gave, then optimizes
// it and closes it.
func (e *env) buildFTS(c *searchCorpus, b *searchBuild, dir string) error {
	f, err := openFTSBuild(dir)
	if err != nil {
		return err
	}
	for i := range c.sessions() {
		_, evs, _ := c.session(i)
		if len(evs) != len(b.events[i]) {
			return errors.Join(fmt.Errorf("session %d: %d events, the store made %d", i, len(evs), len(b.events[i])), f.Close())
		}
		rows := make([]ftsRow, len(evs))
		for k, ev := range evs {
			id := b.events[i][k]
			rows[k] = ftsRow{rowid: b.rowid[id], session: b.ids[i], event: id, text: string(search.RecordText(nil, ev.Payload))}
		}
		if err := f.add(e.ctx, rows); err != nil {
			return errors.Join(err, f.Close())
		}
	}
	return errors.Join(f.optimize(e.ctx), f.Close())
}

// checkHits checks one side's hits for q with a limit above their number:
// no event twice, each one of the corpus's in the session the store put
// it in, each event's text holding every word of q (read from the FTS5
// table, which holds the same text; skipped without it); for the rare
// word, exactly the events that hold it.
func (b *searchBuild) checkHits(ctx context.Context, fts *ftsIndex, side string, q searchQuery, hits []searchHit) error {
	terms := queryTerms(q.text)
	seen := map[uuid.UUID]bool{}
	session := map[uuid.UUID]uuid.UUID{}
	for i, ids := range b.events {
		for _, id := range ids {
			session[id] = b.ids[i]
		}
	}
	for _, h := range hits {
		if seen[h.event] {
			return fmt.Errorf("%s: %s: event %s found twice", side, q.what, h.event)
		}
		seen[h.event] = true
		if s, ok := session[h.event]; !ok || s != h.session {
			return fmt.Errorf("%s: %s: hit %s/%s is no event of that session", side, q.what, h.session, h.event)
		}
		if fts == nil {
			continue
		}
		text, err := fts.text(ctx, b.rowid[h.event])
		if err != nil {
			return fmt.Errorf("%s: %s: the text of %s: %w", side, q.what, h.event, err)
		}
		if !holdsTerms(text, terms) {
			return fmt.Errorf("%s: %s: event %s does not hold %s", side, q.what, h.event, q.text)
		}
	}
	if q.key == "rare" {
		if len(hits) != len(b.rare) {
			return fmt.Errorf("%s: %s: %d hits, want the %d events that hold it", side, q.what, len(hits), len(b.rare))
		}
		for id := range b.rare {
			if !seen[id] {
				return fmt.Errorf("%s: %s: event %s holds it but was not found", side, q.what, id)
			}
		}
	}
	return nil
}

// queryTerms splits a query into its terms' tokens (words, and phrases in
// double quotes).
func queryTerms(q string) [][]string {
	var out [][]string
	for i, part := range strings.Split(q, `"`) {
		if i%2 == 1 {
			out = append(out, textTokens(part))
			continue
		}
		for _, w := range strings.Fields(part) {
			out = append(out, textTokens(w))
		}
	}
	return out
}

// textTokens are the runs of letters and digits of s, lower-cased.
func textTokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// holdsTerms reports whether text's tokens hold each term's tokens
// consecutively.
func holdsTerms(text string, terms [][]string) bool {
	toks := textTokens(text)
	for _, t := range terms {
		found := false
		for i := 0; i+len(t) <= len(toks) && !found; i++ {
			found = slices.Equal(toks[i:i+len(t)], t)
		}
		if !found {
			return false
		}
	}
	return true
}

// searchParts returns the bytes of a closed store's search index and of
// its stored data (its chunks, sealed or not, and its blobs).
func searchParts(s dirSnapshot) (index, data int64) {
	return s.parts[partSearch], s.parts[partPlain] + s.parts[partSealed] + s.parts[partBlobs]
}

// searchDir is the directory of the root that holds the store's search
// index.
const searchDir = "search"
