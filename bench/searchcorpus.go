package main

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/sessionstore/sessionstore"
)

// The search workload's corpus: the shared real transcripts read Passes
// times, every pass after the first with words swapped (see mutate), as
// one stream of events cut into RealSessions sessions of about equal
// bytes; and SynthSessions synthetic coding sessions (codingSession) of
// SynthTurns turns each, every one from its own seed. A made-up word
// (searchRareWord) is put into a few events of both kinds, which the
// corpus records, so that the rare-word query has a known answer.
// Everything is deterministic: a session's events are made on demand from
// its number, never all held at once.

const (
	// searchRareWord is in no transcript (newSearchCorpus checks) and is
	// put into one event of every searchRareEvery-th session.
	searchRareWord  = "quixotryl"
	searchRareEvery = 10
	// searchMutateRate is the share of the eligible words a later pass
	// swaps for another word of the same length.
	searchMutateRate = 0.1
	// searchMinString is the length of the shortest JSON string whose
	// words may be swapped: short values such as "assistant" and keys
	// are left alone (but for a key that long; the record stays valid
	// JSON whatever is swapped).
	searchMinString = 32
)

// searchCorpus is the corpus of the search workload.
type searchCorpus struct {
	real     []Event // the transcripts' events, one pass, in path order
	files    int     // the transcripts read
	passes   int
	cuts     []int // real session j is stream events [cuts[j], cuts[j+1])
	synth    int   // synthetic sessions
	turns    int   // turns of each
	vocab    [][]byte
	rawBytes int64 // payload bytes of the whole corpus
	events   int
}

// newSearchCorpus reads the transcripts under dir (the first files of
// them by path, all for 0) and lays out the corpus: passes over them cut
// into realSessions sessions, then synth synthetic sessions of turns
// turns.
func newSearchCorpus(dir string, files, passes, realSessions, synth, turns int) (*searchCorpus, error) {
	if passes < 1 || realSessions < 1 || synth < 0 {
		return nil, fmt.Errorf("search corpus: %d passes, %d real sessions, %d synthetic: want at least one pass and one real session", passes, realSessions, synth)
	}
	ts, err := loadRealTranscripts(dir, files)
	if err != nil {
		return nil, err
	}
	c := &searchCorpus{files: len(ts), passes: passes, synth: synth, turns: turns}
	for _, t := range ts {
		c.real = append(c.real, t.evs...)
	}
	c.vocab = make([][]byte, searchMaxWord+1)
	for _, ev := range c.real {
		if containsFold(ev.Payload, searchRareWord) {
			return nil, fmt.Errorf("the transcripts under %s hold the search workload's rare word %q", dir, searchRareWord)
		}
		forEachSwappable(ev.Payload, func(start, end int) {
			c.vocab[end-start] = append(c.vocab[end-start], ev.Payload[start:end]...)
		})
	}
	// The cuts: equal shares of the stream's bytes (a swap keeps every
	// length, so each pass has the first one's sizes).
	var one int64
	for _, ev := range c.real {
		one += int64(len(ev.Payload))
	}
	total := one * int64(passes)
	c.cuts = make([]int, 0, realSessions+1)
	c.cuts = append(c.cuts, 0)
	var sum int64
	n := len(c.real) * passes
	for k := 0; k < n && len(c.cuts) < realSessions; k++ {
		sum += int64(len(c.real[k%len(c.real)].Payload))
		if sum >= total*int64(len(c.cuts))/int64(realSessions) {
			c.cuts = append(c.cuts, k+1)
		}
	}
	if c.cuts[len(c.cuts)-1] < n {
		c.cuts = append(c.cuts, n)
	}
	c.rawBytes = total
	c.events = n
	for s := range synth {
		evs, _ := c.synthSession(s)
		c.rawBytes += payloadBytes(evs)
		c.events += len(evs)
	}
	return c, nil
}

// sessions is the number of sessions of the corpus.
func (c *searchCorpus) sessions() int { return len(c.cuts) - 1 + c.synth }

// session returns session i's name, its events, and the indexes of the
// events that hold the rare word.
func (c *searchCorpus) session(i int) (name string, evs []Event, rare []int) {
	if r := len(c.cuts) - 1; i >= r {
		evs, rare = c.synthSession(i - r)
		return fmt.Sprintf("synthetic %d", i-r), evs, rare
	}
	for k := c.cuts[i]; k < c.cuts[i+1]; k++ {
		pass, j := k/len(c.real), k%len(c.real)
		ev := c.real[j]
		if pass > 0 {
			rng := rand.New(rand.NewPCG(uint64(pass), uint64(j)))
			ev.Payload = c.mutate(ev.Payload, rng)
		}
		evs = append(evs, ev)
	}
	if i%searchRareEvery == 0 {
		// The first event from the middle on with a word of the rare
		// word's length takes it.
		for k := len(evs) / 2; k < len(evs)+len(evs)/2; k++ {
			at := k % len(evs)
			if p, ok := putWord(evs[at].Payload, searchRareWord); ok {
				evs[at].Payload = p
				rare = append(rare, at)
				break
			}
		}
	}
	return fmt.Sprintf("transcripts %d", i), evs, rare
}

// synthSession returns synthetic session s and its rare-word events.
func (c *searchCorpus) synthSession(s int) ([]Event, []int) {
	evs := codingSession(c.turns, uint64(1000+s))
	if s%searchRareEvery != 0 {
		return evs, nil
	}
	// Its first user message asks for the rare word.
	evs[0] = fromSS(sessionstore.UserText(fmt.Sprintf("Where did we fix the %s migration last week?", searchRareWord)))
	return evs, []int{0}
}

// The lengths of the words mutate swaps.
const (
	searchMinWord = 3
	searchMaxWord = 12
)

// mutate returns a copy of a JSON record with about searchMutateRate of
// its swappable words (forEachSwappable) replaced by a word of the same
// length drawn from the transcripts' words (so by their frequency). The
// result is valid JSON of the same length: letters replace letters,
// never inside an escape.
func (c *searchCorpus) mutate(rec []byte, rng *rand.Rand) []byte {
	out := slices.Clone(rec)
	forEachSwappable(out, func(start, end int) {
		n := end - start
		if rng.Float64() >= searchMutateRate || len(c.vocab[n]) == 0 {
			return
		}
		w := rng.IntN(len(c.vocab[n]) / n)
		copy(out[start:end], c.vocab[n][w*n:(w+1)*n])
	})
	return out
}

// putWord returns a copy of rec with its first swappable word of
// len(word) letters replaced by word, and whether it had one.
func putWord(rec []byte, word string) ([]byte, bool) {
	at := -1
	forEachSwappable(rec, func(start, end int) {
		if at < 0 && end-start == len(word) {
			at = start
		}
	})
	if at < 0 {
		return rec, false
	}
	out := slices.Clone(rec)
	copy(out[at:], word)
	return out, true
}

// forEachSwappable calls fn with the byte range of every swappable word
// of a JSON record: a run of searchMinWord to searchMaxWord ASCII letters
// inside a string of at least searchMinString bytes, not right after a
// backslash (an escape such as \n or \u), and with no letter, digit or
// non-ASCII byte on either side (so it is a whole token on its own).
func forEachSwappable(rec []byte, fn func(start, end int)) {
	for i := 0; i < len(rec); i++ {
		if rec[i] != '"' {
			continue
		}
		j := i + 1
		for j < len(rec) && rec[j] != '"' {
			if rec[j] == '\\' {
				j++
			}
			j++
		}
		if j-i-1 >= searchMinString {
			s := rec[i+1 : min(j, len(rec))]
			for k := 0; k < len(s); {
				if !isASCIILetter(s[k]) {
					k++
					continue
				}
				e := k
				for e < len(s) && isASCIILetter(s[e]) {
					e++
				}
				n := e - k
				ok := n >= searchMinWord && n <= searchMaxWord &&
					(k == 0 || !isWordByte(s[k-1]) && s[k-1] != '\\') &&
					(e == len(s) || !isWordByte(s[e]))
				if ok {
					fn(i+1+k, i+1+e)
				}
				k = e
			}
		}
		i = j
	}
}

func isASCIILetter(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }

func isWordByte(b byte) bool { return isASCIILetter(b) || '0' <= b && b <= '9' || b >= 0x80 }

// containsFold reports whether the ASCII word occurs in b, ignoring the
// case of ASCII letters.
func containsFold(b []byte, word string) bool {
	for i := 0; i+len(word) <= len(b); i++ {
		match := true
		for k := 0; k < len(word); k++ {
			if b[i+k]|0x20 != word[k] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
