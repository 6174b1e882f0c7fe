package search

import (
	"slices"
	"strings"
)

// Session is a session's place in the index: its events at log positions
// [0, Next) are indexed, the one at Next-1 being Last. UpdatedAt is the
// session's update time (Unix nanoseconds) when it was last checked.
// Private sessions (encrypted) are kept in memory only, never written.
type Session struct {
	ID        [16]byte
	Next      uint64
	Last      [16]byte
	UpdatedAt int64
	Private   bool
	Dead      bool // replaced by a newer slot of the same session
}

// DocInfo is one indexed event.
type DocInfo struct {
	Session uint32 // its slot in Index.Sessions
	Event   [16]byte
	Kind    uint8
	Role    uint8
	Time    int64 // Unix nanoseconds
	Len     uint32
}

// Index is the index in memory: session slots, documents, postings. It is
// not safe for concurrent use: the caller serializes its calls.
type Index struct {
	Sessions []Session
	Docs     []DocInfo
	post     map[string][]uint32 // token -> doc, tf, doc, tf, ... docs ascending
	current  map[[16]byte]uint32 // session id -> its live slot

	saved      int // Docs[:saved] and the sessions' state as of then are in files
	savedNext  map[uint32]uint64
	segments   []uint64 // seqs of the files that hold the index, oldest first
	damaged    bool     // its files were damaged: the next Save replaces them all
	generation uint64   // the seq the next file gets
}

// New is an empty index.
func New() *Index {
	return &Index{post: map[string][]uint32{}, current: map[[16]byte]uint32{}, savedNext: map[uint32]uint64{}}
}

// Slot returns the live slot of session id, if any.
func (x *Index) Slot(id [16]byte) (uint32, bool) {
	s, ok := x.current[id]
	return s, ok
}

// NewSlot starts the session again from position 0: its older slot, if
// any, is dead (its documents are never answered again).
func (x *Index) NewSlot(id [16]byte, private bool) uint32 {
	if old, ok := x.current[id]; ok {
		x.Sessions[old].Dead = true
	}
	x.Sessions = append(x.Sessions, Session{ID: id, Private: private})
	s := uint32(len(x.Sessions) - 1)
	x.current[id] = s
	return s
}

// Forget marks session id's slot dead: its documents are never answered
// again, and the next whole write of the index leaves them out.
func (x *Index) Forget(id [16]byte) {
	if sl, ok := x.current[id]; ok {
		x.Sessions[sl].Dead = true
		delete(x.current, id)
	}
}

// Live calls fn with the id of each session the index holds.
func (x *Index) Live(fn func(id [16]byte)) {
	for id := range x.current {
		fn(id)
	}
}

// Add indexes the event at the slot's next position.
func (x *Index) Add(slot uint32, info DocInfo, d *Doc) {
	info.Session = slot
	info.Len = uint32(min(d.Len(), 1<<31))
	n := uint32(len(x.Docs))
	x.Docs = append(x.Docs, info)
	d.Counts(func(tok string, c int) {
		ps, ok := x.post[tok]
		if !ok {
			// a token is a piece of the record's text: a key of its own,
			// not one that keeps the whole text alive
			tok = strings.Clone(tok)
		}
		x.post[tok] = append(ps, n, uint32(min(c, 1<<31)))
	})
	s := &x.Sessions[slot]
	s.Next++
	s.Last = info.Event
}

// Compact drops the spare room that appending leaves in the postings and
// documents (up to as much again as they hold), so that an index built
// or loaded by appends takes the memory of what it holds.
func (x *Index) Compact() {
	for t, ps := range x.post {
		if cap(ps)-len(ps) > len(ps)/8+2 {
			x.post[t] = slices.Clone(ps)
		}
	}
	if cap(x.Docs)-len(x.Docs) > len(x.Docs)/8 {
		x.Docs = slices.Clone(x.Docs)
	}
}

// Candidate is a document holding every token of a query, with each
// token's count.
type Candidate struct {
	Doc uint32
	TF  []uint32 // per token, in the order given
}

// Candidates returns the live documents holding every token, ascending.
func (x *Index) Candidates(tokens []string) []Candidate {
	lists := make([][]uint32, len(tokens))
	order := make([]int, len(tokens))
	for i, t := range tokens {
		lists[i] = x.post[t]
		if len(lists[i]) == 0 {
			return nil
		}
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return len(lists[a]) - len(lists[b]) })
	at := make([]int, len(tokens))
	var out []Candidate
	first := lists[order[0]]
	var tfs []uint32 // the candidates' TF, allocated a block at a time
next:
	for k := 0; k < len(first); k += 2 {
		doc := first[k]
		if len(tfs) < len(tokens) {
			tfs = make([]uint32, len(tokens)*min(1024, len(first)/2-k/2))
		}
		tf := tfs[:len(tokens):len(tokens)]
		clear(tf)
		tf[order[0]] = first[k+1]
		for _, i := range order[1:] {
			l := lists[i]
			// gallop to doc
			j := at[i]
			step := 2
			for j+step < len(l) && l[j+step] < doc {
				j += step
				step *= 2
			}
			for j < len(l) && l[j] < doc {
				j += 2
			}
			at[i] = j
			if j >= len(l) {
				break next
			}
			if l[j] != doc {
				continue next
			}
			tf[i] = l[j+1]
		}
		if x.Sessions[x.Docs[doc].Session].Dead {
			continue
		}
		tfs = tfs[len(tokens):]
		out = append(out, Candidate{Doc: doc, TF: tf})
	}
	return out
}
